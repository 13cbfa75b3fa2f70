package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/localslurm"
	"github.com/flexslurm/flexslurm/shared/node"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
)

// guests plays the guest side of the simulated VMs: each running VM gets a
// metadata server of its own from the Compute simulator, and its "boot"
// runs `flexslurm node boot` — the binary, as its own process — with
// GCE_METADATA_HOST pointing at it, the Secret Manager stand-in (which
// holds this host's munge key) and the Pub/Sub emulator: the same code
// path as a real VM, only the endpoints differ. The simulated VMs share
// one root (one kernel, one munged, one /home), where each node's files
// are named after it; the metadata-server rule the bootstrap adds is
// removed when the VM stops.
type guests struct {
	sim        *computesim.Sim
	tokens     *computesim.Tokens
	secrets    *computesim.SecretManager
	secretsURL string
	secretsSrv *http.Server
	exe        string
	root       string // the simulated VMs' filesystem root
	logDir     string
	healthDir  string
	pubsubHost string
	clock      string

	mu       sync.Mutex
	meta     map[string]*computesim.MetadataServer // VM name → its metadata server
	keyed    map[string]bool                       // secrets filled with the munge key
	mungeKey []byte
	// slurmRoot is the Slurm chroot whose munged and slurmd each VM runs
	// ("" for the host's).
	slurmRoot string
}

// errVMGone: the VM was deleted before its guest booted.
var errVMGone = errors.New("the VM is gone")

// guestRoot is the simulated VMs' root under the local Slurm's directory;
// the node-side hooks are linked in its etc/flexslurm/hooks.
func guestRoot(slurmRoot string) string { return filepath.Join(slurmRoot, "vm-root") }

// guestHookDir is where every simulated VM's bootstrap links the node-side
// hooks, and where slurm.conf names them.
func guestHookDir(slurmRoot string) string {
	return filepath.Join(guestRoot(slurmRoot), "etc/flexslurm/hooks")
}

func newGuests(sim *computesim.Sim, exe, slurmRoot string, inst localslurm.Installation, logDir, healthDir, pubsubHost, clock string) (*guests, error) {
	key, err := os.ReadFile(inst.Path("/etc/munge/munge.key"))
	if err != nil {
		return nil, fmt.Errorf("reading the Slurm %s munge key for the Secret Manager stand-in: %w", inst.Name, err)
	}
	tokens := computesim.NewTokens()
	g := &guests{sim: sim, tokens: tokens, secrets: &computesim.SecretManager{Tokens: tokens}, exe: exe,
		root: guestRoot(slurmRoot), logDir: logDir, healthDir: healthDir, pubsubHost: pubsubHost, clock: clock,
		meta: map[string]*computesim.MetadataServer{}, keyed: map[string]bool{}, mungeKey: key}
	if inst.Chrooted() {
		g.slurmRoot = inst.Root
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("Secret Manager stand-in: %w", err) //lint:ignore ST1005 a product name
	}
	g.secretsSrv = &http.Server{Handler: g.secrets, ReadHeaderTimeout: 10 * time.Second}
	go g.secretsSrv.Serve(ln)
	g.secretsURL = "http://" + ln.Addr().String() + "/"
	if err := os.MkdirAll(g.root, 0o755); err != nil {
		return nil, err
	}
	g.stopLeftovers()
	return g, nil
}

// stopLeftovers stops the slurmds that an earlier run's bootstraps started
// under the same root and left running (after a crash): the simulated VMs
// are gone with that run.
func (g *guests) stopLeftovers() {
	files, _ := filepath.Glob(filepath.Join(g.root, "run/flexslurm/slurmd-*.pid"))
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "slurmd-"), ".pid")
		g.stopSlurmd(name)
		os.Remove(f)
	}
}

// metadataServer returns VM vm's metadata server, starting it when needed.
func (g *guests) metadataServer(in computesim.Instance) (*computesim.MetadataServer, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ms := g.meta[in.Name]; ms != nil {
		return ms, nil
	}
	ms, err := g.sim.StartMetadataServer(in.Zone, in.Name, "127.0.0.1:0", g.tokens)
	if err != nil {
		return nil, err
	}
	// A rule for the port this server now holds can only have been left by
	// a process killed before its shutdown removed it: drop it, so that the
	// guest's bootstrap adds (and reports) its own.
	if err := node.RemoveFirewallFor(context.Background(), ms.Addr()); err != nil {
		return nil, errors.Join(err, ms.Close())
	}
	g.meta[in.Name] = ms
	return ms, nil
}

// metadataAddr returns the address of VM vm's metadata server, "" when it
// has none.
func (g *guests) metadataAddr(vm string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ms := g.meta[vm]; ms != nil {
		return ms.Addr()
	}
	return ""
}

// fillSecret gives the secret the VM's node config names this host's munge
// key, once: the operator's step on a real deployment.
func (g *guests) fillSecret(ctx context.Context, ms *computesim.MetadataServer) error {
	get := func(path string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ms.Addr()+"/computeMetadata/v1/"+path, nil)
		if err != nil {
			return 0, "", err
		}
		req.Header.Set(computesim.MetadataFlavorHeader, computesim.MetadataFlavor)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", fmt.Errorf("the VM's metadata server: %w", err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(body), err
	}
	if code, _, err := get("instance/name"); err != nil {
		return err
	} else if code == http.StatusNotFound {
		return errVMGone
	}
	code, body, err := get("instance/attributes/" + nodeconfig.AttrConfig)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("the VM has no %s attribute (HTTP %d): its template does not carry the node config", nodeconfig.AttrConfig, code)
	}
	cfg, err := nodeconfig.Decode(body)
	if err != nil {
		return err
	}
	secret, _, _ := strings.Cut(cfg.MungeKeySecret, "/versions/")
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.keyed[secret] {
		return nil
	}
	if _, err := g.secrets.AddVersion(secret, g.mungeKey); err != nil {
		return err
	}
	g.keyed[secret] = true
	return nil
}

// boot runs `flexslurm node boot` for VM in, as its guest would at boot,
// and waits for it (the bootstrap bounds itself).
func (g *guests) boot(ctx context.Context, in computesim.Instance) error {
	ms, err := g.metadataServer(in)
	if err != nil {
		return err
	}
	if err := g.fillSecret(ctx, ms); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(g.logDir, "boot-"+in.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"node", "boot", "--root", g.root, "--exe", g.exe, "--report-boot", "--own-hostname", "--timeout", "90s",
		"--health-from-dir", g.healthDir, "--hooks-publish-timeout", "5s"}
	if g.clock != "" {
		args = append(args, "--clock", g.clock)
	}
	if g.slurmRoot != "" {
		args = append(args, "--slurm-root", g.slurmRoot)
	}
	cmd := exec.CommandContext(ctx, g.exe, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "GCE_METADATA_HOST=" + ms.Addr(),
		"FLEXSLURM_SECRETMANAGER_ENDPOINT=" + g.secretsURL, "PUBSUB_EMULATOR_HOST=" + g.pubsubHost}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("flexslurm node boot for VM %s: %w (see %s)", in.Name, err, logf.Name())
	}
	return nil
}

// slurmdRunning reports whether node's slurmd, as its bootstrap started
// it, runs.
func (g *guests) slurmdRunning(nodeName string) bool {
	pid := node.SlurmdPID(g.root, nodeName)
	return pid > 0 && (node.OSHost{}).Running(pid, "slurmd")
}

// stopSlurmd stops node's slurmd (TERM, KILL after 10 s).
func (g *guests) stopSlurmd(nodeName string) {
	if pid := node.SlurmdPID(g.root, nodeName); pid > 0 && (node.OSHost{}).Running(pid, "slurmd") {
		(node.OSHost{}).Stop(pid, 10*time.Second)
	}
}

// shutdown ends VM vm's guest: its metadata server, and the rule its
// bootstrap added for it.
func (g *guests) shutdown(vm string) error {
	g.mu.Lock()
	ms := g.meta[vm]
	delete(g.meta, vm)
	g.mu.Unlock()
	if ms == nil {
		return nil
	}
	return errors.Join(node.RemoveFirewallFor(context.Background(), ms.Addr()), ms.Close())
}

// close ends every guest, unmounts the simulated VMs' /home and stops the
// Secret Manager stand-in.
func (g *guests) close() error {
	g.mu.Lock()
	var vms []string
	for vm := range g.meta {
		vms = append(vms, vm)
	}
	g.mu.Unlock()
	var errs []error
	for _, vm := range vms {
		errs = append(errs, g.shutdown(vm))
	}
	home := filepath.Join(g.root, "home")
	if m, err := (node.OSHost{}).Mounted(home); err == nil && m {
		if out, err := exec.Command("/usr/bin/umount", home).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("unmounting %s: %v: %s", home, err, out))
		}
	}
	errs = append(errs, g.secretsSrv.Close())
	return errors.Join(errs...)
}
