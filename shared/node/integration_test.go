package node

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"cloud.google.com/go/compute/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
)

// needRoot skips a test that needs root, iptables, runuser, curl and the
// munge user — loudly, or fails it when FLEXSLURM_REQUIRE_SLURM=1 (the
// machines that run the local Slurm have them).
func needRoot(t *testing.T) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, p := range []string{IptablesPath, RunuserPath, MountPath, "/usr/bin/curl", "/usr/bin/umount"} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	for _, u := range []string{"munge", "nobody"} {
		if _, err := user.Lookup(u); err != nil {
			missing = append(missing, "user "+u)
		}
	}
	if len(missing) == 0 {
		if out, err := exec.Command(IptablesPath, "-w", "-L", "OUTPUT", "-n").CombinedOutput(); err != nil {
			missing = append(missing, "a working iptables ("+strings.TrimSpace(string(out))+")")
		}
	}
	if len(missing) > 0 {
		msg := "SKIPPED LOUDLY: this test needs " + strings.Join(missing, ", ")
		if os.Getenv("FLEXSLURM_REQUIRE_SLURM") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// simHost is the real machine, but for munged and slurmd, which need a
// Slurm controller (the local system's end-to-end runs start them).
type simHost struct {
	OSHost
	pidFile, socket string
	started         []string
}

func (h *simHost) Run(ctx context.Context, program string, args ...string) (int, []byte, error) {
	if program == RunuserPath {
		h.started = append(h.started, "munged")
		err := errors.Join(os.WriteFile(h.pidFile, []byte(strconv.Itoa(os.Getpid())), 0o644), os.WriteFile(h.socket, nil, 0o644))
		return 0, nil, err
	}
	return h.OSHost.Run(ctx, program, args...)
}

func (h *simHost) Start(program string, args []string, logPath string) (int, error) {
	h.started = append(h.started, filepath.Base(program)+" "+strings.Join(args, " "))
	return os.Getpid(), nil
}

func (h *simHost) Running(pid int, name string) bool {
	return pid == os.Getpid() && (name == "slurmd" || name == "munged")
}

// TestBootOnThisHostLetsOnlyRootAtTheTokenAndTheKey boots a simulated VM
// through the real metadata and Secret Manager clients, the real iptables,
// mount and chown, then checks as nobody that neither the node service
// account's token nor the munge key can be had, while root (and munge)
// can. nobody gets the token before the bootstrap, so the check can fail.
// The metadata server listens on an address of its own (metaIP), so that
// the rule covers every port of it, as on Google's server: nobody is also
// refused on a second port there (Google's server answers on more than 80).
func TestBootOnThisHostLetsOnlyRootAtTheTokenAndTheKey(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A VM whose template carries its pool's node config.
	root := t.TempDir()
	homeSrc := filepath.Join(root, "srv-home")
	if err := os.MkdirAll(homeSrc, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Home = nodeconfig.Mount{Type: nodeconfig.MountBind, Source: homeSrc, Dir: "/home"}
	raw, _ := cfg.Encode()
	sim := computesim.New(computesim.Options{Project: "proj"}, clock.NewManual(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)))
	api := httptest.NewServer(sim)
	defer api.Close()
	if err := createVM(ctx, api.URL, raw); err != nil {
		t.Fatal(err)
	}
	tokens := computesim.NewTokens()
	ms, err := sim.StartMetadataServer("us-central1-a", testVM, metaIP+":0", tokens)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	sm := &computesim.SecretManager{Tokens: tokens}
	key := []byte(strings.Repeat("0123456789abcdef", 64))
	if _, err := sm.AddVersion("projects/proj/secrets/flexvm-munge-key", key); err != nil {
		t.Fatal(err)
	}
	smSrv := httptest.NewServer(sm)
	defer smSrv.Close()
	t.Setenv("GCE_METADATA_HOST", ms.Addr())
	tokenURL := "http://" + ms.Addr() + "/computeMetadata/v1/instance/service-accounts/default/token"

	// A rule for this port can only be stale (the port is this test's now).
	if err := RemoveFirewallFor(ctx, ms.Addr()); err != nil {
		t.Fatal(err)
	}
	// A second port of the metadata server's address.
	other := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	if other.Listener, err = net.Listen("tcp", metaIP+":0"); err != nil {
		t.Fatal(err)
	}
	other.Start()
	defer other.Close()
	// Before the bootstrap any user gets the token, and the other port.
	if out, err := asUser("nobody", "/usr/bin/curl", "-sSf", "-m", "60", "-H", "Metadata-Flavor: Google", tokenURL); err != nil {
		t.Fatalf("before the bootstrap nobody cannot fetch the token either (%v: %s): the check below proves nothing", err, out)
	}
	if out, err := asUser("nobody", "/usr/bin/curl", "-sSf", "-m", "60", other.URL); err != nil {
		t.Fatalf("before the bootstrap nobody cannot reach the second port either (%v: %s): the check below proves nothing", err, out)
	}

	rule, _ := FirewallRule(ms.Addr())
	t.Cleanup(func() {
		if err := RemoveFirewall(context.Background(), OSHost{}, rule); err != nil {
			t.Errorf("removing the rule: %v", err)
		}
	})
	home := filepath.Join(root, "home")
	t.Cleanup(func() { _ = exec.Command("/usr/bin/umount", home).Run() })

	secrets, err := NewSecretManager(ctx, smSrv.URL)
	if err != nil {
		t.Fatal(err)
	}
	h := &simHost{pidFile: filepath.Join(root, "munged.pid"), socket: filepath.Join(root, "munge.socket.2")}
	o := Options{Root: root, Exe: "/usr/local/bin/flexslurm", MetadataHost: ms.Addr(),
		MungeKeyPath: filepath.Join(root, "etc/munge/munge.key"), MungedPidFile: h.pidFile, MungeSocket: h.socket,
		Metadata: metadata.NewClient(nil), Secrets: secrets, Reporter: &fakeReporter{}, Host: h, SlurmdSettle: time.Millisecond}
	res, err := Boot(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Node != "flexvm-a3u-1" || len(h.started) != 2 || h.started[1] != "slurmd -D --conf-server 10.0.0.5:6817 -N flexvm-a3u-1" {
		t.Errorf("booted %+v, started %q", res, h.started)
	}
	if m, err := (OSHost{}).Mounted(home); err != nil || !m {
		t.Errorf("home not mounted on %s: %v", home, err)
	}

	// The token: root only.
	// Refused (curl exit 7), not merely slow: a timeout on a loaded
	// machine would prove nothing.
	out, err := asUser("nobody", "/usr/bin/curl", "-sSf", "-m", "60", "-H", "Metadata-Flavor: Google", tokenURL)
	var ee *exec.ExitError
	switch {
	case err == nil:
		t.Errorf("nobody fetched the node service account's token after the bootstrap: %s", out)
	case !errors.As(err, &ee) || ee.ExitCode() != 7:
		t.Errorf("nobody's token request failed otherwise than refused (%v: %s): want curl's exit 7, connection refused", err, out)
	}
	if out, err := asUser("nobody", "/usr/bin/curl", "-sSf", "-m", "60", other.URL); err == nil || !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Errorf("nobody on the metadata server's second port: %v: %s; want refused (curl's exit 7)", err, out)
	}
	if resp, err := http.Get(other.URL); err != nil {
		t.Errorf("root cannot reach the second port: %v", err)
	} else {
		resp.Body.Close()
	}
	if _, err := metadata.NewClient(nil).GetWithContext(ctx, "instance/service-accounts/default/token"); err != nil {
		t.Errorf("root cannot fetch the token: %v", err)
	}
	// The key: munge only (every directory above it is searchable).
	for _, d := range []string{filepath.Dir(root), root, filepath.Join(root, "etc"), filepath.Join(root, "etc/munge")} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := asUser("nobody", "/usr/bin/cat", o.MungeKeyPath); err == nil {
		t.Errorf("nobody read the munge key: %d bytes", len(out))
	}
	if out, err := asUser("munge", "/usr/bin/cat", o.MungeKeyPath); err != nil || string(out) != string(key) {
		t.Errorf("munge cannot read its key (%v): %.60s", err, out)
	}

	// Again: nothing to do.
	if res, err := Boot(ctx, o); err != nil || len(res.Did) != 0 {
		t.Errorf("second run: %v, changed %v", err, res.Did)
	}
	out, _ = exec.Command(IptablesPath, "-w", "-S", "OUTPUT").CombinedOutput()
	if n := strings.Count(string(out), "-d "+metaIP+"/32"); n != 1 {
		t.Errorf("%d copies of the rule in OUTPUT:\n%s", n, out)
	}
}

// metaIP is the simulated metadata server's own address: a loopback
// address no other service uses, so that its rule (every port) touches
// nothing else.
const metaIP = "127.83.0.1"

func asUser(u string, argv ...string) ([]byte, error) {
	cmd := exec.Command(RunuserPath, append([]string{"-u", u, "--"}, argv...)...)
	cmd.Dir = "/"
	return cmd.CombinedOutput()
}

// createVM creates VM flexvm-a3u-1-g2 through the simulator's API.
func createVM(ctx context.Context, url, nodeAttr string) error {
	return simCreate(ctx, url, &computepb.InstanceTemplate{
		Name: proto.String("tpl"),
		Properties: &computepb.InstanceProperties{
			MachineType: proto.String("a3-ultragpu-8g"),
			Metadata:    &computepb.Metadata{Items: []*computepb.Items{{Key: proto.String(nodeconfig.AttrConfig), Value: proto.String(nodeAttr)}}},
			Disks: []*computepb.AttachedDisk{{Boot: proto.Bool(true), AutoDelete: proto.Bool(true),
				InitializeParams: &computepb.AttachedDiskInitializeParams{SourceImage: proto.String("projects/debian-cloud/global/images/family/debian-12")}}},
			NetworkInterfaces: []*computepb.NetworkInterface{{Network: proto.String("global/networks/default")}},
			ServiceAccounts: []*computepb.ServiceAccount{{Email: proto.String("node@proj.iam.gserviceaccount.com"),
				Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"}}},
			Scheduling: &computepb.Scheduling{ProvisioningModel: proto.String("FLEX_START"), InstanceTerminationAction: proto.String("DELETE"),
				OnHostMaintenance: proto.String("TERMINATE"), AutomaticRestart: proto.Bool(false), MaxRunDuration: &computepb.Duration{Seconds: proto.Int64(7200)}},
			ReservationAffinity: &computepb.ReservationAffinity{ConsumeReservationType: proto.String("NO_RESERVATION")},
		},
	}, testVM)
}

// TestRemoveStaleFirewallFreesANewServer leaves a rule behind for a port,
// as a killed process does, binds a server on that port, and checks that
// nobody is refused before RemoveFirewallFor and served after it.
func TestRemoveStaleFirewallFreesANewServer(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	rule, err := FirewallRule(addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureFirewall(ctx, OSHost{}, rule); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = RemoveFirewall(context.Background(), OSHost{}, rule) })
	if out, err := asUser("nobody", "/usr/bin/curl", "-sSf", "-m", "60", srv.URL); err == nil {
		t.Fatalf("with the stale rule nobody still reached the server (%s): the check below proves nothing", out)
	}
	if err := RemoveFirewallFor(ctx, addr); err != nil {
		t.Fatal(err)
	}
	if out, err := asUser("nobody", "/usr/bin/curl", "-sSf", "-m", "60", srv.URL); err != nil || string(out) != "ok" {
		t.Errorf("after RemoveFirewallFor nobody got %q, %v", out, err)
	}
}
