package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/hooks"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
)

const testVM = "flexvm-a3u-1-g2"

func testConfig() nodeconfig.Config {
	return nodeconfig.Config{Version: nodeconfig.Version, Cluster: "flexvm", Pool: "a3u", Project: "proj",
		ConfServer: "10.0.0.5:6817", MungeKeySecret: "projects/proj/secrets/flexvm-munge-key/versions/latest",
		Home: nodeconfig.Mount{Type: nodeconfig.MountBind, Source: "/srv/home", Dir: "/home"}, GPUCount: 8,
		Topics: nodeconfig.Topics{Jobs: "job-pending", Health: "health-failure"}}
}

type fakeMetadata struct {
	name, zone, project string
	attrs               map[string]string
}

func (m fakeMetadata) InstanceNameWithContext(context.Context) (string, error) { return m.name, nil }
func (m fakeMetadata) ZoneWithContext(context.Context) (string, error)         { return m.zone, nil }
func (m fakeMetadata) ProjectIDWithContext(context.Context) (string, error)    { return m.project, nil }
func (m fakeMetadata) InstanceAttributeValueWithContext(_ context.Context, k string) (string, error) {
	v, ok := m.attrs[k]
	if !ok {
		return "", fmt.Errorf("%s not defined", k)
	}
	return v, nil
}

type fakeSecrets struct {
	key []byte
	err error
}

func (s *fakeSecrets) Access(_ context.Context, v string) ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.key, nil
}

type report struct {
	project, topic string
	ev             event.Bootstrap
}

type fakeReporter struct{ got []report }

func (r *fakeReporter) BootstrapFailed(_ context.Context, project, topic string, ev event.Bootstrap) error {
	r.got = append(r.got, report{project, topic, ev})
	return nil
}

// fakeHost records commands and plays iptables, mount, munged and slurmd.
type fakeHost struct {
	t      *testing.T
	o      *Options
	mu     sync.Mutex
	cmds   []string
	rules  map[string]bool
	mounts map[string]bool
	procs  map[int]string
	nextID int
	owners map[string][2]int
	// slurmdDies makes a started slurmd exit at once.
	slurmdDies bool
}

func newFakeHost(t *testing.T) *fakeHost {
	return &fakeHost{t: t, rules: map[string]bool{}, mounts: map[string]bool{}, procs: map[int]string{}, nextID: 100, owners: map[string][2]int{}}
}

func (h *fakeHost) Run(_ context.Context, program string, args ...string) (int, []byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	line := filepath.Base(program) + " " + strings.Join(args, " ")
	h.cmds = append(h.cmds, line)
	if b := filepath.Base(program); b == "iptables" || b == "ip6tables" {
		program = IptablesPath
	}
	switch program {
	case IptablesPath:
		rule := filepath.Base(line[:strings.IndexByte(line, ' ')]) + " " + strings.Join(args[3:], " ")
		switch args[1] {
		case "-C":
			if h.rules[rule] {
				return 0, nil, nil
			}
			return 1, []byte("iptables: Bad rule (does a matching rule exist in that chain?)."), nil
		case "-I":
			h.rules[rule] = true
			return 0, nil, nil
		case "-D":
			if !h.rules[rule] {
				return 1, nil, nil
			}
			delete(h.rules, rule)
			return 0, nil, nil
		}
	case MountPath:
		h.mounts[args[len(args)-1]] = true
		return 0, nil, nil
	case RunuserPath, ChrootPath:
		if program == ChrootPath && (len(args) < 2 || args[1] != RunuserPath) {
			return 127, []byte("unexpected program in the chroot"), nil
		}
		h.nextID++
		h.procs[h.nextID] = "munged"
		if err := os.WriteFile(h.o.MungedPidFile, []byte(fmt.Sprint(h.nextID)), 0o644); err != nil {
			h.t.Fatal(err)
		}
		if err := os.WriteFile(h.o.MungeSocket, nil, 0o644); err != nil {
			h.t.Fatal(err)
		}
		return 0, nil, nil
	}
	return 127, []byte("unexpected program"), nil
}

func (h *fakeHost) Start(program string, args []string, logPath string) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cmds = append(h.cmds, "start "+filepath.Base(program)+" "+strings.Join(args, " "))
	h.nextID++
	name := filepath.Base(program)
	if program == ChrootPath && len(args) > 1 {
		name = filepath.Base(args[1]) // chroot(8) execs it
	}
	if !h.slurmdDies {
		h.procs[h.nextID] = name
	} else {
		_ = os.WriteFile(logPath, []byte("fatal: Unable to establish controller machine"), 0o644)
	}
	return h.nextID, nil
}

func (h *fakeHost) Running(pid int, name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.procs[pid] == name
}

func (h *fakeHost) Stop(pid int, _ time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cmds = append(h.cmds, fmt.Sprintf("stop %s", h.procs[pid]))
	delete(h.procs, pid)
}

func (h *fakeHost) Mounted(dir string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mounts[dir], nil
}

func (h *fakeHost) LookupUser(name string) (int, int, error) {
	if name != "munge" {
		return 0, 0, fmt.Errorf("no user %s", name)
	}
	return 105, 107, nil
}

func (h *fakeHost) Owner(path string) (int, int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.Unlock()
	o := h.ownerOf(path)
	h.mu.Lock()
	return o[0], o[1], nil
}

func (h *fakeHost) Chown(path string, uid, gid int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.owners[path] = [2]int{uid, gid}
	return nil
}

// renamed follows a chown of a temporary file to the path it was renamed to.
func (h *fakeHost) ownerOf(path string) [2]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if o, ok := h.owners[path]; ok {
		return o
	}
	for p, o := range h.owners {
		if strings.HasPrefix(filepath.Base(p), ".munge.key.") && filepath.Dir(p) == filepath.Dir(path) {
			return o
		}
	}
	return [2]int{}
}

func (h *fakeHost) commands() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := slices.Clone(h.cmds)
	h.cmds = nil
	return out
}

type fixture struct {
	o   Options
	h   *fakeHost
	sec *fakeSecrets
	rep *fakeReporter
}

func newFixture(t *testing.T, cfg nodeconfig.Config) *fixture {
	t.Helper()
	root := t.TempDir()
	raw, err := cfg.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"etc/munge", "run/munge"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{h: newFakeHost(t), sec: &fakeSecrets{key: []byte(strings.Repeat("k", 1024))}, rep: &fakeReporter{}}
	f.o = Options{
		Root: root, Exe: "/usr/local/bin/flexslurm", MetadataHost: "127.0.0.1:34567",
		MungeKeyPath: filepath.Join(root, "etc/munge/munge.key"), MungedPidFile: filepath.Join(root, "run/munge/munged.pid"),
		MungeSocket: filepath.Join(root, "run/munge/munge.socket.2"),
		MungedWait:  time.Second, SlurmdSettle: time.Millisecond,
		Metadata: fakeMetadata{name: testVM, zone: "us-central1-a", project: "proj", attrs: map[string]string{nodeconfig.AttrConfig: raw}},
		Secrets:  f.sec, Reporter: f.rep, Host: f.h,
		Now: func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) },
	}
	f.h.o = &f.o
	return f
}

const wantRule = "-d 127.0.0.1/32 -p tcp --dport 34567 -m owner ! --uid-owner 0 -j REJECT --reject-with tcp-reset"

func TestBootAFreshVM(t *testing.T) {
	f := newFixture(t, testConfig())
	res, err := Boot(context.Background(), f.o)
	if err != nil {
		t.Fatal(err)
	}
	root := f.o.Root
	want := []string{
		"iptables -w -C OUTPUT " + wantRule,
		"iptables -w -I OUTPUT " + wantRule,
		"mount --bind -- /srv/home " + filepath.Join(root, "home"),
		"runuser -u munge -- /usr/sbin/munged",
		"start slurmd -D --conf-server 10.0.0.5:6817 -N flexvm-a3u-1",
	}
	if d := cmp.Diff(want, f.h.commands()); d != "" {
		t.Errorf("commands (-want +got):\n%s", d)
	}
	if res.Node != "flexvm-a3u-1" || res.VM != testVM || res.Zone != "us-central1-a" || res.Project != "proj" {
		t.Errorf("identity %+v", res)
	}
	// The munge key: the secret's bytes, 0400, munge:munge.
	key, err := os.ReadFile(f.o.MungeKeyPath)
	if err != nil || string(key) != string(f.sec.key) {
		t.Fatalf("munge key %d bytes, %v", len(key), err)
	}
	st, _ := os.Stat(f.o.MungeKeyPath)
	if st.Mode().Perm() != 0o400 {
		t.Errorf("munge key mode %v, want 0400", st.Mode().Perm())
	}
	if o := f.h.ownerOf(f.o.MungeKeyPath); o != [2]int{105, 107} {
		t.Errorf("munge key owner %v, want munge (105:107)", o)
	}
	// The node-side hooks: links to the binary, and their configuration.
	hookDir := filepath.Join(root, "etc/flexslurm/hooks")
	for _, h := range []string{"prolog", "epilog", "healthcheck"} {
		if l, err := os.Readlink(filepath.Join(hookDir, "flexslurm-hook-"+h)); err != nil || l != f.o.Exe {
			t.Errorf("hook %s links to %q, %v", h, l, err)
		}
	}
	hc, err := hooks.LoadConfig(filepath.Join(hookDir, hooks.ConfigFileName))
	if err != nil {
		t.Fatal(err)
	}
	wantHC := hooks.Config{Cluster: "flexvm", Project: "proj",
		SpoolDir: filepath.Join(root, "var/spool/flexslurm"), LogDir: filepath.Join(root, "var/log/flexslurm"),
		VMNameDir:    filepath.Join(root, "run/flexslurm/vm"),
		Topics:       hooks.Topics{Jobs: "job-pending", Health: "health-failure"},
		SpoolSenders: hooks.SpoolSenders{0: {hooks.RoleNode}},
		CheckCmd:     []string{f.o.Exe, "health", "check", "--accelerator-count", "8"}}
	if d := cmp.Diff(wantHC, hc); d != "" {
		t.Errorf("hooks.json (-want +got):\n%s", d)
	}
	// The spool: root's 0755, with root's own directory 0700, nothing else;
	// the hooks' logs root's too.
	for path, mode := range map[string]os.FileMode{"var/spool/flexslurm": 0o755, "var/spool/flexslurm/0": 0o700, "var/log/flexslurm": 0o755} {
		if st, err := os.Lstat(filepath.Join(root, path)); err != nil || st.Mode()&(os.ModePerm|os.ModeSticky) != mode || !st.IsDir() {
			t.Errorf("%s: %v, %v; want a directory of mode %v", path, st.Mode(), err, mode)
		}
	}
	if vm, _ := os.ReadFile(filepath.Join(root, "run/flexslurm/vm/flexvm-a3u-1")); strings.TrimSpace(string(vm)) != testVM {
		t.Errorf("VM name file %q", vm)
	}
	// The hooks sign their reports at the bootstrap's metadata server,
	// recorded for this node alone (simulated VMs share one root).
	if got := hooks.NodeMetadataHost(hc, "flexvm-a3u-1"); got != f.o.MetadataHost {
		t.Errorf("the node hooks sign at %q, want the bootstrap's metadata server %q", got, f.o.MetadataHost)
	}
	if got := hooks.NodeMetadataHost(hc, "flexvm-a3u-2"); got != "" {
		t.Errorf("another node's hooks sign at %q, want Compute Engine's (\"\")", got)
	}
	if pid := SlurmdPID(root, "flexvm-a3u-1"); pid == 0 || !f.h.Running(pid, "slurmd") {
		t.Errorf("slurmd PID %d not recorded or not running", pid)
	}
	if len(f.rep.got) != 0 {
		t.Errorf("a successful bootstrap reported %v", f.rep.got)
	}
}

// TestBootAVMItsMIGNamed: a VM its MIG named from the base
// "<node>-g<generation>" (a resize request that could not name it) boots
// as that node, and its hooks report under its own name.
func TestBootAVMItsMIGNamed(t *testing.T) {
	f := newFixture(t, testConfig())
	md := f.o.Metadata.(fakeMetadata)
	md.name = testVM + "-x7k2"
	f.o.Metadata = md
	res, err := Boot(context.Background(), f.o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Node != "flexvm-a3u-1" || res.VM != testVM+"-x7k2" {
		t.Errorf("identity %+v, want node flexvm-a3u-1, VM %s-x7k2", res, testVM)
	}
	if cmds := f.h.commands(); !slices.Contains(cmds, "start slurmd -D --conf-server 10.0.0.5:6817 -N flexvm-a3u-1") {
		t.Errorf("commands %v: slurmd does not run as flexvm-a3u-1", cmds)
	}
	if vm, _ := os.ReadFile(filepath.Join(f.o.Root, "run/flexslurm/vm/flexvm-a3u-1")); strings.TrimSpace(string(vm)) != testVM+"-x7k2" {
		t.Errorf("VM name file %q", vm)
	}
	// A name that is neither form is no node's.
	md.name = testVM + "-X7K2"
	f2 := newFixture(t, testConfig())
	f2.o.Metadata = md
	if _, err := Boot(context.Background(), f2.o); err == nil || !strings.Contains(err.Error(), "not a flexslurm node VM") {
		t.Errorf("boot as %s: %v, want a refusal", md.name, err)
	}
}

// TestBootInASlurmChroot: with SlurmRoot (the local system's Slurm 24.11
// chroot), munged and slurmd run chrooted, and the munge key is the
// chroot's, owned by the chroot's munge user.
func TestBootInASlurmChroot(t *testing.T) {
	f := newFixture(t, testConfig())
	chroot := t.TempDir()
	for _, d := range []string{"etc/munge", "run/munge"} {
		if err := os.MkdirAll(filepath.Join(chroot, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	passwd := "root:x:0:0:root:/root:/bin/bash\nmunge:x:991:992::/nonexistent:/usr/sbin/nologin\n"
	if err := os.WriteFile(filepath.Join(chroot, "etc/passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	f.o.SlurmRoot = chroot
	f.o.MungeKeyPath, f.o.MungedPidFile, f.o.MungeSocket = "", "", ""
	o := f.o.withDefaults()
	f.h.o = &o // the fake munged writes the chroot's PID file and socket
	if _, err := Boot(context.Background(), f.o); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"iptables -w -C OUTPUT " + wantRule,
		"iptables -w -I OUTPUT " + wantRule,
		"mount --bind -- /srv/home " + filepath.Join(f.o.Root, "home"),
		"chroot " + chroot + " /usr/sbin/runuser -u munge -- /usr/sbin/munged",
		"start chroot " + chroot + " /usr/sbin/slurmd -D --conf-server 10.0.0.5:6817 -N flexvm-a3u-1",
	}
	if d := cmp.Diff(want, f.h.commands()); d != "" {
		t.Errorf("commands (-want +got):\n%s", d)
	}
	keyPath := filepath.Join(chroot, "etc/munge/munge.key")
	if key, err := os.ReadFile(keyPath); err != nil || string(key) != string(f.sec.key) {
		t.Fatalf("the chroot's munge key: %d bytes, %v", len(key), err)
	}
	if own := f.h.ownerOf(keyPath); own != [2]int{991, 992} {
		t.Errorf("munge key owner %v, want the chroot's munge (991:992)", own)
	}
	if pid := SlurmdPID(f.o.Root, "flexvm-a3u-1"); pid == 0 || !f.h.Running(pid, "slurmd") {
		t.Errorf("slurmd PID %d not recorded or not running", pid)
	}
	f.o.SlurmRoot = "relative"
	if _, err := Boot(context.Background(), f.o); err == nil || !strings.Contains(err.Error(), `slurm root "relative"`) {
		t.Errorf("a relative slurm root: %v, want an error naming it", err)
	}
}

func TestBootIsIdempotent(t *testing.T) {
	f := newFixture(t, testConfig())
	if _, err := Boot(context.Background(), f.o); err != nil {
		t.Fatal(err)
	}
	f.h.commands()
	res, err := Boot(context.Background(), f.o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Did) != 0 {
		t.Errorf("second run changed %v", res.Did)
	}
	if d := cmp.Diff([]string{"iptables -w -C OUTPUT " + wantRule}, f.h.commands()); d != "" {
		t.Errorf("second run's commands (-want +got):\n%s", d)
	}
	// After a reboot: slurmd and munged gone, home unmounted, the key's
	// mode changed by hand; the rule is gone with the reboot too.
	f.h.procs = map[int]string{}
	f.h.mounts = map[string]bool{}
	f.h.rules = map[string]bool{}
	if err := os.Chmod(f.o.MungeKeyPath, 0o644); err != nil {
		t.Fatal(err)
	}
	f.h.owners = map[string][2]int{f.o.MungeKeyPath: {0, 0}}
	res, err = Boot(context.Background(), f.o)
	if err != nil {
		t.Fatal(err)
	}
	wantDid := []string{"metadata server restricted to root", "munge key mode -rw-r--r-- set to 0400", "munge key given to munge:munge",
		"/srv/home mounted on " + filepath.Join(f.o.Root, "home") + " (bind)", "munged started",
		"slurmd started (pid N, --conf-server 10.0.0.5:6817)"}
	if d := cmp.Diff(wantDid, res.Did, cmp.Transformer("pid", func(s string) string {
		return regexp.MustCompile(`pid [0-9]+`).ReplaceAllString(s, "pid N")
	})); d != "" {
		t.Errorf("after a reboot (-want +got):\n%s", d)
	}
	if st, _ := os.Stat(f.o.MungeKeyPath); st.Mode().Perm() != 0o400 {
		t.Errorf("key mode %v", st.Mode().Perm())
	}
}

func TestBootRestartsMungedWhenTheKeyChanges(t *testing.T) {
	f := newFixture(t, testConfig())
	if _, err := Boot(context.Background(), f.o); err != nil {
		t.Fatal(err)
	}
	f.h.commands()
	f.sec.key = []byte(strings.Repeat("n", 1024))
	res, err := Boot(context.Background(), f.o)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"iptables -w -C OUTPUT " + wantRule, "stop munged", "runuser -u munge -- /usr/sbin/munged"}
	if d := cmp.Diff(want, f.h.commands()); d != "" {
		t.Errorf("commands (-want +got):\n%s", d)
	}
	if !slices.Contains(res.Did, "munge key written") {
		t.Errorf("did %v", res.Did)
	}
	if key, _ := os.ReadFile(f.o.MungeKeyPath); string(key) != string(f.sec.key) {
		t.Error("the new key was not written")
	}
}

func TestBootReportsItsFailure(t *testing.T) {
	other := testConfig()
	other.Pool = "h200"
	for _, tc := range []struct {
		name     string
		cfg      nodeconfig.Config
		setup    func(*fixture)
		step     string
		reported bool
	}{
		{"secret unreadable", testConfig(), func(f *fixture) { f.sec.err = errors.New("googleapi: Error 403: Permission denied") }, event.BootstrapStepMungeKey, true},
		{"short key", testConfig(), func(f *fixture) { f.sec.key = []byte("short") }, event.BootstrapStepMungeKey, true},
		{"slurmd exits", testConfig(), func(f *fixture) { f.h.slurmdDies = true }, event.BootstrapStepSlurmd, true},
		{"config of another pool", other, func(*fixture) {}, event.BootstrapStepIdentity, true},
		{"metadata server not root-only", testConfig(), func(f *fixture) { f.o.MetadataHost = "metadata.google.internal:80" }, event.BootstrapStepFirewall, true},
		{"no config attribute", testConfig(), func(f *fixture) {
			m := f.o.Metadata.(fakeMetadata)
			m.attrs = nil
			f.o.Metadata = m
		}, event.BootstrapStepIdentity, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.cfg)
			tc.setup(f)
			_, err := Boot(context.Background(), f.o)
			var se *StepError
			if !errors.As(err, &se) || se.Step != tc.step {
				t.Fatalf("error %v, want a failure of step %s", err, tc.step)
			}
			if !tc.reported {
				if len(f.rep.got) != 0 {
					t.Errorf("reported %v without a node config", f.rep.got)
				}
				return
			}
			if len(f.rep.got) != 1 {
				t.Fatalf("reports %v, want one", f.rep.got)
			}
			r := f.rep.got[0]
			if r.project != "proj" || r.topic != "job-pending" || r.ev.Type != event.TypeBootstrapFail || r.ev.Node != "flexvm-a3u-1" ||
				r.ev.VMName != testVM || r.ev.Step != tc.step || r.ev.Cluster != "flexvm" || r.ev.Error == "" {
				t.Errorf("report %+v", r)
			}
			data, _ := jsonMarshal(r.ev)
			if _, err := event.DecodeBootstrap(data); err != nil {
				t.Errorf("the report does not decode: %v", err)
			}
			if tc.step != event.BootstrapStepSlurmd && SlurmdPID(f.o.Root, "flexvm-a3u-1") != 0 {
				t.Error("slurmd started after a failed step")
			}
		})
	}
}

func TestFirewallRule(t *testing.T) {
	const reject = "-j REJECT --reject-with tcp-reset"
	for _, tc := range []struct {
		fw   MetadataFirewall
		want []string
	}{
		{MetadataFirewall{Host: "169.254.169.254:80"},
			[]string{"/usr/sbin/iptables -w -I OUTPUT -d 169.254.169.254/32 -p tcp ! --dport 53 -m owner ! --uid-owner 0 " + reject}},
		{MetadataFirewall{Host: "169.254.169.254:80", Allow: []int{0, 990}, IPv6: true}, []string{
			"/usr/sbin/iptables -w -I OUTPUT -d 169.254.169.254/32 -p tcp ! --dport 53 -m owner ! --uid-owner 0 -m owner ! --uid-owner 990 " + reject,
			"/usr/sbin/ip6tables -w -I OUTPUT -d fd20:ce::254/128 -p tcp ! --dport 53 -m owner ! --uid-owner 0 -m owner ! --uid-owner 990 " + reject}},
		// The loopback address every local service shares: the port only.
		{MetadataFirewall{Host: "127.0.0.1:9"},
			[]string{"/usr/sbin/iptables -w -I OUTPUT -d 127.0.0.1/32 -p tcp --dport 9 -m owner ! --uid-owner 0 " + reject}},
		// A simulated VM's own address: every port.
		{MetadataFirewall{Host: "127.83.0.1:9"},
			[]string{"/usr/sbin/iptables -w -I OUTPUT -d 127.83.0.1/32 -p tcp ! --dport 53 -m owner ! --uid-owner 0 " + reject}},
	} {
		rules, err := tc.fw.Rules()
		var got []string
		for _, r := range rules {
			got = append(got, r.String())
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%+v: rules %q, %v; want %q", tc.fw, got, err, tc.want)
		}
	}
	for _, bad := range []string{"metadata.google.internal:80", "169.254.169.254", "[::1]:80", "10.0.0.1:0"} {
		if _, err := FirewallRule(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := (MetadataFirewall{Host: "169.254.169.254:80", Allow: []int{-1}}).Rules(); err == nil {
		t.Error("a negative uid accepted")
	}
	if metadataHostPort("169.254.169.254") != "169.254.169.254:80" {
		t.Error("a host without a port is not on port 80")
	}
	h := newFakeHost(t)
	rule, _ := FirewallRule("127.0.0.1:9")
	for i, want := range []bool{true, false} {
		if added, err := EnsureFirewall(context.Background(), h, rule); err != nil || added != want {
			t.Errorf("EnsureFirewall #%d: added %v, %v", i, added, err)
		}
	}
	if err := RemoveFirewall(context.Background(), h, rule); err != nil || len(h.rules) != 0 {
		t.Errorf("RemoveFirewall: %v, rules left %v", err, h.rules)
	}
}

// TestAttackMetadataServerOtherPortsAndIPv6: on a VM of Google's metadata
// server, a user must reach it neither on another port than 80 nor over
// IPv6: the bootstrap covers every TCP port but DNS's and, where the
// kernel has IPv6 and ip6tables exists, [fd20:ce::254]; with a routable
// IPv6 address and no ip6tables it fails rather than leave it open.
func TestAttackMetadataServerOtherPortsAndIPv6(t *testing.T) {
	const (
		global    = "fd000000000000000000000000000001 02 40 00 00 ens4\n00000000000000000000000000000001 01 80 10 80 lo\n"
		linkLocal = "fe80000000000000040100fffe0a0002 02 40 20 80 ens4\n00000000000000000000000000000001 01 80 10 80 lo\n"
	)
	v4 := "iptables -w -I OUTPUT -d 169.254.169.254/32 -p tcp ! --dport 53 -m owner ! --uid-owner 0 -j REJECT --reject-with tcp-reset"
	v6 := "ip6tables -w -I OUTPUT -d fd20:ce::254/128 -p tcp ! --dport 53 -m owner ! --uid-owner 0 -j REJECT --reject-with tcp-reset"
	for _, tc := range []struct {
		name      string
		ifInet6   string // "" for no file
		ip6tables bool
		want      []string // rules inserted
		fail      bool
	}{
		{"no IPv6 in the kernel", "", true, []string{v4}, false},
		{"IPv6 with a routable address", global, true, []string{v4, v6}, false},
		{"IPv6 link-local only, ip6tables present", linkLocal, true, []string{v4, v6}, false},
		{"IPv6 link-local only, no ip6tables", linkLocal, false, []string{v4}, false},
		{"routable IPv6 but no ip6tables", global, false, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testConfig())
			f.o.MetadataHost = DefaultMetadataHost
			dir := t.TempDir()
			f.o.IfInet6 = filepath.Join(dir, "if_inet6")
			if tc.ifInet6 != "" {
				if err := os.WriteFile(f.o.IfInet6, []byte(tc.ifInet6), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			f.o.Ip6tables = filepath.Join(dir, "ip6tables")
			if tc.ip6tables {
				if err := os.WriteFile(f.o.Ip6tables, []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Boot(context.Background(), f.o)
			if tc.fail {
				var se *StepError
				if !errors.As(err, &se) || se.Step != event.BootstrapStepFirewall || !strings.Contains(err.Error(), "ip6tables") {
					t.Fatalf("Boot = %v; want the firewall step to fail naming ip6tables", err)
				}
				if len(f.rep.got) != 1 {
					t.Errorf("the failure was not reported")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var inserted []string
			for _, c := range f.h.commands() {
				if strings.Contains(c, " -I OUTPUT ") {
					inserted = append(inserted, c)
				}
			}
			if d := cmp.Diff(tc.want, inserted); d != "" {
				t.Errorf("rules inserted (-want +got):\n%s", d)
			}
			for _, r := range inserted {
				if strings.Contains(r, "--dport 80") {
					t.Errorf("rule %q covers port 80 only", r)
				}
			}
		})
	}
}

func TestMountedIn(t *testing.T) {
	table := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
98 22 0:50 / /run/vm\040one/home rw - nfs 10.0.0.2:/home rw
`
	for dir, want := range map[string]bool{"/": true, "/run/vm one/home": true, "/home": false} {
		got, err := mountedIn(bufio.NewScanner(strings.NewReader(table)), dir)
		if err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", dir, got, err, want)
		}
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// TestAttackSpoolLeftWorldWritableIsTightenedAtBoot: a node upgraded from
// a version whose spool was world-writable (1777), where a user made the
// directory named for root and one of their own, gets the spool back: the
// root 0755 and root's, the planted root directory set aside, a fresh one
// made, the user's own left alone (the hooks ignore it).
func TestAttackSpoolLeftWorldWritableIsTightenedAtBoot(t *testing.T) {
	f := newFixture(t, testConfig())
	spool := filepath.Join(f.o.Root, "var/spool/flexslurm")
	for _, d := range []string{"0", "65534"} {
		if err := os.MkdirAll(filepath.Join(spool, d), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(spool, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(spool, "0", "0000000000000000001-1-abcd.msg")
	if err := os.WriteFile(planted, []byte(`{"topic":"job-pending"}`), 0o666); err != nil {
		t.Fatal(err)
	}
	f.h.owners[spool] = [2]int{65534, 65534}
	f.h.owners[filepath.Join(spool, "0")] = [2]int{65534, 65534}
	res, err := Boot(context.Background(), f.o)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(spool); err != nil || st.Mode()&(os.ModePerm|os.ModeSticky) != 0o755 {
		t.Errorf("spool root mode %v, %v; want 0755", st.Mode(), err)
	}
	if o := f.h.ownerOf(spool); o != [2]int{0, 0} {
		t.Errorf("spool root owner %v; want root", o)
	}
	if o := f.h.ownerOf(filepath.Join(spool, "0")); o != [2]int{0, 0} {
		t.Errorf("root's spool directory owner %v; want root", o)
	}
	if _, err := os.Stat(planted); err == nil {
		t.Errorf("the planted message is still in root's directory")
	}
	if entries, _ := os.ReadDir(filepath.Join(spool, "0")); len(entries) != 0 {
		t.Errorf("root's spool directory holds %v; want a fresh, empty one", entries)
	}
	if st, err := os.Lstat(filepath.Join(spool, "0")); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("root's spool directory mode %v, %v; want 0700", st.Mode(), err)
	}
	aside, _ := filepath.Glob(filepath.Join(spool, ".foreign-0-*", "*.msg"))
	if len(aside) != 1 {
		t.Errorf("the planted directory was not set aside: %v", aside)
	}
	if !slices.ContainsFunc(res.Did, func(s string) bool { return strings.Contains(s, "set aside") }) {
		t.Errorf("the bootstrap did not say it set the directory aside: %v", res.Did)
	}
	// A second boot changes nothing.
	res, err = Boot(context.Background(), f.o)
	if err != nil || slices.ContainsFunc(res.Did, func(s string) bool { return strings.Contains(s, "spool") }) {
		t.Errorf("second boot: %v, did %v; want the spool left as it is", err, res.Did)
	}
}
