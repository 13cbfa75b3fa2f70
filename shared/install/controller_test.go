package install

import (
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/hooks"
)

// testController installs as the user running the test, who is also the
// SlurmUser.
func testController(t *testing.T) Controller {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return Controller{
		Binary: "/usr/local/bin/flexslurm", Project: "my-project-1", Cluster: "flexvm",
		Spec:      []byte(`{"cluster_id": "flexvm"}` + "\n"),
		SlurmUser: u.Username, UID: os.Geteuid(), GID: os.Getegid(),
		SlurmBinDir: "/usr/bin", SlurmConf: "/etc/slurm/slurm.conf",
		OwnerUID: os.Geteuid(), OwnerGID: os.Getegid(),
	}
}

type fileState struct {
	Mode     fs.FileMode
	UID, GID int
	Content  string
	Target   string
}

// tree reads every path under root.
func tree(t *testing.T, root string) map[string]fileState {
	t.Helper()
	got := map[string]fileState{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		st, err := os.Lstat(path)
		if err != nil {
			return err
		}
		sys := st.Sys().(*syscall.Stat_t)
		s := fileState{Mode: st.Mode() & (fs.ModeType | perm), UID: int(sys.Uid), GID: int(sys.Gid)}
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			s.Target, err = os.Readlink(path)
			s.Mode = fs.ModeSymlink
		case st.Mode().IsRegular():
			var b []byte
			b, err = os.ReadFile(path)
			s.Content = string(b)
		}
		got[strings.TrimPrefix(path, root)] = s
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestInstallIntoRoot installs into an empty root and checks every file,
// mode, owner and link; a second install changes nothing.
func TestInstallIntoRoot(t *testing.T) {
	root := t.TempDir()
	c := testController(t)
	items, err := c.Items()
	if err != nil {
		t.Fatal(err)
	}
	changes, err := Apply(root, items, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range changes {
		if ch.Action != "created" {
			t.Errorf("first install: %s", ch)
		}
	}
	me, gid := os.Geteuid(), os.Getegid()
	dir := func(mode fs.FileMode) fileState { return fileState{Mode: fs.ModeDir | mode, UID: me, GID: gid} }
	link := fileState{Mode: fs.ModeSymlink, UID: me, GID: gid, Target: "/usr/local/bin/flexslurm"}
	hooksJSON := `{
  "cluster": "flexvm",
  "project": "my-project-1",
  "spec": "/etc/flexslurm/cluster_config.json",
  "spool_dir": "/var/spool/flexslurm",
  "spool_senders": {
    "` + strconv.Itoa(me) + `": [
      "controller"
    ]
  },
  "log_dir": "/var/log/flexslurm"
}
`
	want := map[string]fileState{
		"/etc":                               dir(0o755),
		"/etc/flexslurm":                     dir(0o755),
		"/etc/flexslurm/cluster_config.json": {Mode: 0o644, UID: me, GID: gid, Content: `{"cluster_id": "flexvm"}` + "\n"},
		"/etc/flexslurm/hooks.json":          {Mode: 0o644, UID: me, GID: gid, Content: hooksJSON},
		"/etc/systemd":                       dir(0o755),
		"/etc/systemd/system":                dir(0o755),
		"/etc/systemd/system/flexslurm-agent.service":             {Mode: 0o644, UID: me, GID: gid, Content: c.Unit()},
		"/etc/systemd/system/flexslurm-metadata-firewall.service": {Mode: 0o644, UID: me, GID: gid, Content: c.FirewallUnit()},
		"/usr":                         dir(0o755),
		"/usr/local":                   dir(0o755),
		"/usr/local/libexec":           dir(0o755),
		"/usr/local/libexec/flexslurm": dir(0o755),
		"/usr/local/libexec/flexslurm/flexslurm-hook-resume":      link,
		"/usr/local/libexec/flexslurm/flexslurm-hook-suspend":     link,
		"/usr/local/libexec/flexslurm/flexslurm-hook-resume-fail": link,
		"/usr/local/libexec/flexslurm/flexslurm-hook-prolog-ctld": link,
		"/usr/local/libexec/flexslurm/flexslurm-hook-epilog-ctld": link,
		"/var":                 dir(0o755),
		"/var/spool":           dir(0o755),
		"/var/spool/flexslurm": dir(0o755),
		"/var/spool/flexslurm/" + strconv.Itoa(me): dir(0o700),
		"/var/lib":           dir(0o755),
		"/var/lib/flexslurm": dir(0o700),
		"/var/log":           dir(0o755),
		"/var/log/flexslurm": dir(0o755),
	}
	// Parents made on the way follow the umask.
	old := syscall.Umask(0)
	syscall.Umask(old)
	for _, p := range []string{"/etc", "/etc/systemd", "/etc/systemd/system", "/usr", "/usr/local", "/usr/local/libexec", "/var", "/var/spool", "/var/lib", "/var/log"} {
		want[p] = dir(0o755 &^ fs.FileMode(old))
	}
	if diff := cmp.Diff(want, tree(t, root)); diff != "" {
		t.Errorf("installed tree (-want +got):\n%s", diff)
	}
	var cfg hooks.Config
	if cfg, err = hooks.LoadConfig(filepath.Join(root, HooksConfigPath)); err != nil || cfg.Validate() != nil {
		t.Errorf("the hooks cannot read their config: %v %v", err, cfg.Validate())
	}

	again, err := Apply(root, items, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range again {
		if ch.Action != "unchanged" {
			t.Errorf("second install: %s", ch)
		}
	}
}

// TestInstallRepairsAndUpdates: a changed spec, a hook link to another
// binary and a spool whose mode was changed are put right, nothing else is
// touched; a file where a link belongs is an error, not replaced.
func TestInstallRepairsAndUpdates(t *testing.T) {
	root := t.TempDir()
	c := testController(t)
	items, _ := c.Items()
	if _, err := Apply(root, items, false); err != nil {
		t.Fatal(err)
	}
	resume := filepath.Join(root, HookPath("resume"))
	os.Remove(resume)
	if err := os.Symlink("/opt/old/flexslurm", resume); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, SpoolDir), 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	c.Spec = []byte(`{"cluster_id": "flexvm", "v": 2}`)
	items, _ = c.Items()

	dry, err := Apply(root, items, true)
	if err != nil {
		t.Fatal(err)
	}
	before := tree(t, root)
	changes, err := Apply(root, items, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(dry, changes); diff != "" {
		t.Errorf("the dry run announced other changes (-dry +real):\n%s", diff)
	}
	var changed []string
	for _, ch := range changes {
		if ch.Action != "unchanged" {
			changed = append(changed, ch.String())
		}
	}
	if diff := cmp.Diff([]string{"updated " + SpecPath, "updated " + HookPath("resume"), "updated " + SpoolDir}, changed); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if before[HookPath("resume")].Target != "/opt/old/flexslurm" {
		t.Error("the dry run changed the tree")
	}
	if target, _ := os.Readlink(resume); target != c.Binary {
		t.Errorf("resume link -> %s", target)
	}

	suspend := filepath.Join(root, HookPath("suspend"))
	os.Remove(suspend)
	if err := os.WriteFile(suspend, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(root, items, false); err == nil || !strings.Contains(err.Error(), "installing "+HookPath("suspend")+": exists and is not a symbolic link") {
		t.Errorf("a file where a link belongs: err = %v", err)
	}
	if b, _ := os.ReadFile(suspend); string(b) != "#!/bin/sh\n" {
		t.Error("the file was replaced")
	}
}

// TestUninstall removes everything an install created, keeps a spool that
// holds unpublished messages and what is not its own, and is idempotent.
func TestUninstall(t *testing.T) {
	root := t.TempDir()
	c := testController(t)
	items, _ := c.Items()
	if _, err := Apply(root, items, false); err != nil {
		t.Fatal(err)
	}
	msg := filepath.Join(root, SpoolDir, strconv.Itoa(c.UID), "0000000000000000001-1-ab.msg")
	if err := os.WriteFile(msg, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(root, "/etc/systemd/system/other.service")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dry, err := Remove(root, c.Installed(), true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, UnitPath)); err != nil {
		t.Fatalf("the dry run removed the unit: %v", err)
	}
	changes, err := Remove(root, c.Installed(), false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(dry, changes); diff != "" {
		t.Errorf("the dry run announced other changes (-dry +real):\n%s", diff)
	}
	got := map[string]string{}
	for _, ch := range changes {
		got[ch.Path] = ch.Action
	}
	want := map[string]string{
		UnitPath: "removed", FirewallUnitPath: "removed", "/etc/systemd/system": "kept: shared",
		LogDir: "removed", StateDir: "removed",
		filepath.Join(SpoolDir, strconv.Itoa(c.UID)): "kept: not empty (1 entries)", SpoolDir: "kept: not empty (1 entries)",
		HookDir: "removed", ConfigDir: "removed", SpecPath: "removed", HooksConfigPath: "removed",
	}
	for _, h := range ControllerHooks {
		want[HookPath(h)] = "removed"
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("uninstall (-want +got):\n%s", diff)
	}
	for _, p := range []string{msg, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	again, err := Remove(root, c.Installed(), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range again {
		if ch.Action != "absent" && !strings.HasPrefix(ch.Action, "kept") {
			t.Errorf("second uninstall: %s", ch)
		}
	}
}

// TestUnitAndSlurmConf pins the agent's unit and the slurm.conf lines.
func TestUnitAndSlurmConf(t *testing.T) {
	c := Controller{Binary: "/usr/local/bin/flexslurm", Project: "my-project-1", SlurmUser: "slurm", UID: 64030, GID: 64030,
		SlurmBinDir: "/opt/slurm/bin", SlurmConf: "/opt/slurm/etc/slurm.conf"}
	unit := c.Unit()
	for _, line := range []string{
		"User=slurm",
		"ExecStart=/usr/local/bin/flexslurm agent --spec /etc/flexslurm/cluster_config.json --project my-project-1 --spool /var/spool/flexslurm --ledger /var/lib/flexslurm/agent-ledger.json --slurm-bin /opt/slurm/bin",
		"Environment=SLURM_CONF=/opt/slurm/etc/slurm.conf",
		"Restart=on-failure",
		"CapabilityBoundingSet=",
		"NoNewPrivileges=yes",
		"ProtectSystem=strict",
		"ReadWritePaths=/var/spool/flexslurm /var/lib/flexslurm",
		"WantedBy=multi-user.target",
	} {
		if !strings.Contains(unit, "\n"+line+"\n") {
			t.Errorf("unit lacks %q:\n%s", line, unit)
		}
	}
	c.SlurmUser, c.UID, c.SlurmConf = "root", 0, "/etc/slurm/slurm.conf"
	unit = c.Unit()
	if !strings.Contains(unit, "\nCapabilityBoundingSet=CAP_DAC_OVERRIDE CAP_FOWNER\n") || strings.Contains(unit, "SLURM_CONF") {
		t.Errorf("root unit:\n%s", unit)
	}
	want := []string{
		"ResumeProgram=/usr/local/libexec/flexslurm/flexslurm-hook-resume",
		"SuspendProgram=/usr/local/libexec/flexslurm/flexslurm-hook-suspend",
		"ResumeFailProgram=/usr/local/libexec/flexslurm/flexslurm-hook-resume-fail",
		"PrologSlurmctld=/usr/local/libexec/flexslurm/flexslurm-hook-prolog-ctld",
		"EpilogSlurmctld=/usr/local/libexec/flexslurm/flexslurm-hook-epilog-ctld",
		"Prolog=/etc/flexslurm/hooks/flexslurm-hook-prolog",
		"Epilog=/etc/flexslurm/hooks/flexslurm-hook-epilog",
		"HealthCheckProgram=/etc/flexslurm/hooks/flexslurm-hook-healthcheck",
		"HealthCheckInterval=60",
		"HealthCheckNodeState=ANY",
	}
	if diff := cmp.Diff(want, SlurmConfLines()); diff != "" {
		t.Errorf("slurm.conf lines (-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	err := Controller{Binary: "flexslurm", Project: "P", SlurmUser: "", UID: -1, SlurmBinDir: "/opt/my bin"}.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{`binary "flexslurm"`, `project "P"`, "spec: a cluster spec is required", `slurm user ""`, `slurm bin dir "/opt/my bin"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q not in %v", want, err)
		}
	}
	if _, err := (Controller{}).Items(); err == nil {
		t.Error("Items of an invalid controller")
	}
}

// TestAttackSpoolLeftWorldWritableIsTightenedAtInstall: a controller
// upgraded from a version whose spool was world-writable (1777), where
// another user made the SlurmUser's directory before the SlurmUser did and
// one of their own: the install makes the spool the owner's 0755 again,
// sets the planted directory aside (never giving it, with what it holds,
// to the SlurmUser), makes a fresh one, and leaves the user's own alone
// (the hooks ignore it).
func TestAttackSpoolLeftWorldWritableIsTightenedAtInstall(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP (loud): needs root to give directories to other users (CI runs as root)")
	}
	const slurmUID, nobody = 4242, 65534
	root := t.TempDir()
	c := testController(t)
	c.SlurmUser, c.UID, c.GID = "slurm", slurmUID, slurmUID
	spool := filepath.Join(root, SpoolDir)
	planted := filepath.Join(spool, strconv.Itoa(slurmUID))
	for _, d := range []string{planted, filepath.Join(spool, strconv.Itoa(nobody))} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(spool, 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	msg := filepath.Join(planted, "0000000000000000001-1-ab.msg")
	if err := os.WriteFile(msg, []byte(`{"topic":"cluster-spec"}`), 0o666); err != nil {
		t.Fatal(err)
	}
	items, err := c.Items()
	if err != nil {
		t.Fatal(err)
	}
	dry, err := Apply(root, items, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(msg); err != nil {
		t.Fatalf("the dry run moved the planted directory: %v", err)
	}
	changes, err := Apply(root, items, false)
	if err != nil {
		t.Fatal(err)
	}
	got := tree(t, root)
	if s := got[SpoolDir]; s.Mode != fs.ModeDir|0o755 || s.UID != 0 {
		t.Errorf("spool %+v; want root's 0755", s)
	}
	if s := got[filepath.Join(SpoolDir, strconv.Itoa(slurmUID))]; s.Mode != fs.ModeDir|0o700 || s.UID != slurmUID {
		t.Errorf("the SlurmUser's directory %+v; want its own, 0700", s)
	}
	if _, err := os.Stat(msg); err == nil {
		t.Error("the planted message is in the SlurmUser's directory")
	}
	if aside, _ := filepath.Glob(filepath.Join(spool, ".foreign-"+strconv.Itoa(slurmUID)+"-*", "*.msg")); len(aside) != 1 {
		t.Errorf("the planted directory was not set aside: %v", aside)
	}
	if s := got[filepath.Join(SpoolDir, strconv.Itoa(nobody))]; s.UID != nobody {
		t.Errorf("nobody's own directory %+v was touched", s)
	}
	for i, ch := range changes {
		if ch.Path == filepath.Join(SpoolDir, strconv.Itoa(slurmUID)) && (!strings.Contains(ch.Action, "set aside") || !strings.Contains(dry[i].Action, "set aside")) {
			t.Errorf("change %q (dry run %q); want it to say the directory was set aside", ch, dry[i])
		}
	}
	var cfg hooks.Config
	if cfg, err = hooks.LoadConfig(filepath.Join(root, HooksConfigPath)); err != nil {
		t.Fatal(err)
	}
	if !cfg.SpoolSenders.Equal(hooks.SpoolSenders{0: {hooks.RoleController}, slurmUID: {hooks.RoleController}}) {
		t.Errorf("spool_senders %v; want root and the SlurmUser, as the controller", cfg.SpoolSenders)
	}
}

// TestFirewallUnit pins the controller's metadata-server unit and rule:
// root and the SlurmUser only, every port, applied before the network.
func TestFirewallUnit(t *testing.T) {
	c := Controller{Binary: "/usr/local/bin/flexslurm", SlurmUser: "slurm", UID: 64030, GID: 64030}
	unit := c.FirewallUnit()
	for _, line := range []string{
		"Type=oneshot", "RemainAfterExit=yes", "DefaultDependencies=no", "After=local-fs.target",
		"Before=network-pre.target slurmctld.service flexslurm-agent.service systemd-user-sessions.service",
		"ExecStart=/usr/local/bin/flexslurm metadata-firewall --allow-uid 64030",
		"ExecStop=/usr/local/bin/flexslurm metadata-firewall --remove --allow-uid 64030",
		"WantedBy=multi-user.target",
	} {
		if !strings.Contains(unit, "\n"+line+"\n") {
			t.Errorf("unit lacks %q:\n%s", line, unit)
		}
	}
	rules, err := c.MetadataFirewall().Rules()
	if err != nil || len(rules) != 1 || !strings.Contains(rules[0].String(),
		"-d 169.254.169.254/32 -p tcp ! --dport 53 -m owner ! --uid-owner 0 -m owner ! --uid-owner 64030 -j REJECT") {
		t.Errorf("rules %v, %v", rules, err)
	}
	c.UID = 0
	if u := c.FirewallUnit(); strings.Contains(u, "--allow-uid") {
		t.Errorf("a root SlurmUser needs no --allow-uid:\n%s", u)
	}
}
