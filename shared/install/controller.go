// Package install installs flexslurm's controller side on a Slurm
// controller: the agent's systemd unit, the controller hooks' links, their
// configuration, the installed cluster spec and the directories they write
// to (`flexslurm install controller`).
//
// What to install is decided by Controller.Items, a pure function of the
// options; Apply and Remove only execute such a list under a root
// directory ("/" on a controller, a temporary directory in tests), and are
// idempotent: what is already as wanted is left alone and reported
// unchanged.
package install

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/flexslurm/flexslurm/shared/agent"
	"github.com/flexslurm/flexslurm/shared/hooks"
	"github.com/flexslurm/flexslurm/shared/node"
	"github.com/flexslurm/flexslurm/shared/slurm"
)

// Where the controller side is installed, relative to the root.
const (
	// ConfigDir holds the hooks' configuration and the installed spec.
	ConfigDir = "/etc/flexslurm"
	// SpecPath is the installed copy of the cluster spec, read by the
	// hooks and the agent.
	SpecPath = ConfigDir + "/cluster_config.json"
	// HooksConfigPath is the hooks' configuration, where the hooks look
	// for it when nothing else names one.
	HooksConfigPath = hooks.DefaultConfigPath
	// HookDir holds the flexslurm-hook-NAME links that slurm.conf names.
	HookDir = agent.DefaultConfigHookDir
	// SpoolDir is the hooks' and the agent's spool.
	SpoolDir = hooks.DefaultSpoolDir
	// StateDir holds the agent's command ledger.
	StateDir = "/var/lib/flexslurm"
	// LogDir receives the hooks' logs (hooks-<user>.log).
	LogDir = "/var/log/flexslurm"
	// UnitName and UnitPath are the agent's systemd unit.
	UnitName = "flexslurm-agent.service"
	UnitPath = "/etc/systemd/system/" + UnitName
	// FirewallUnitName and FirewallUnitPath are the oneshot unit that keeps
	// every user but root and the SlurmUser from the metadata server, at
	// every boot (iptables rules do not survive a reboot).
	FirewallUnitName = "flexslurm-metadata-firewall.service"
	FirewallUnitPath = "/etc/systemd/system/" + FirewallUnitName
)

// ControllerHooks are the hooks slurmctld runs, as the SlurmUser.
var ControllerHooks = []string{slurm.HookResume, slurm.HookSuspend, slurm.HookResumeFail, slurm.HookPrologCtld, slurm.HookEpilogCtld}

// Controller is what `flexslurm install controller` installs.
type Controller struct {
	// Binary is the absolute path of the flexslurm binary the hook links
	// and the unit run.
	Binary string
	// Project is the Google Cloud project of the topics.
	Project string
	// Cluster is the spec's cluster id; Spec is the spec file's content,
	// installed as SpecPath.
	Cluster string
	Spec    []byte
	// SlurmUser is slurm.conf's SlurmUser ("root" when unset there), with
	// its uid and gid: the controller hooks and the agent run as that user.
	SlurmUser string
	UID, GID  int
	// SlurmBinDir holds scontrol, squeue and sinfo: slurm.DefaultBinDir
	// when empty.
	SlurmBinDir string
	// SlurmConf is slurm.conf's path, passed to the agent as SLURM_CONF
	// when it is not slurm.DefaultConfPath.
	SlurmConf string
	// OwnerUID and OwnerGID own what is not the SlurmUser's: 0 (root) on a
	// controller; the installing user under a test root.
	OwnerUID, OwnerGID int
}

// Kind is the kind of an Item.
type Kind int

// Kinds of Item.
const (
	Dir Kind = iota
	File
	Link
)

// Item is one directory, file or symbolic link to install, by absolute
// path under the root.
type Item struct {
	Kind Kind
	Path string
	// Mode and owner of a directory or file.
	Mode     fs.FileMode
	UID, GID int
	// Content of a file.
	Content []byte
	// Target of a link.
	Target string
	// Shared marks a directory other software may use too (/etc/systemd
	// …): created when missing, never changed or removed.
	Shared bool
	// Private marks a directory whose content its owner trusts (a spool
	// directory): one found with another owner, or not a directory, was
	// made by someone else and is set aside (renamed .foreign-…) and a
	// fresh one made, rather than given over with what it holds.
	Private bool
}

// safePath is what may appear unquoted in a systemd unit's ExecStart and
// in slurm.conf: no space, quote or systemd specifier (%).
var safePath = regexp.MustCompile(`^/[A-Za-z0-9/._+-]*$`)

var projectRE = regexp.MustCompile(`^[a-z][a-z0-9-]{4,28}[a-z0-9]$`)

// Validate reports every problem of c, naming the option.
func (c Controller) Validate() error {
	var errs []error
	if !safePath.MatchString(c.Binary) {
		errs = append(errs, fmt.Errorf("binary %q must be an absolute path of letters, digits and / . _ + -", c.Binary))
	}
	if !projectRE.MatchString(c.Project) {
		errs = append(errs, fmt.Errorf("project %q is not a Google Cloud project id (6–30 lowercase letters, digits and hyphens, starting with a letter)", c.Project))
	}
	if c.Cluster == "" || len(c.Spec) == 0 {
		errs = append(errs, errors.New("spec: a cluster spec is required"))
	}
	if c.SlurmUser == "" || c.UID < 0 || c.GID < 0 {
		errs = append(errs, fmt.Errorf("slurm user %q (uid %d, gid %d) is not a user of this machine", c.SlurmUser, c.UID, c.GID))
	}
	if c.SlurmBinDir != "" && !safePath.MatchString(c.SlurmBinDir) {
		errs = append(errs, fmt.Errorf("slurm bin dir %q must be an absolute path of letters, digits and / . _ + -", c.SlurmBinDir))
	}
	if c.SlurmConf != "" && !safePath.MatchString(c.SlurmConf) {
		errs = append(errs, fmt.Errorf("slurm.conf path %q must be an absolute path of letters, digits and / . _ + -", c.SlurmConf))
	}
	return errors.Join(errs...)
}

// HooksConfig is the hooks' configuration c installs.
func (c Controller) HooksConfig() hooks.Config {
	cfg := hooks.Config{Cluster: c.Cluster, Project: c.Project, Spec: SpecPath, SpoolDir: SpoolDir, LogDir: LogDir,
		SpoolSenders: c.SpoolSenders()}
	if c.SlurmBinDir != slurm.DefaultBinDir {
		cfg.SlurmBinDir = c.SlurmBinDir
	}
	return cfg
}

// SpoolSenders are the users whose spool directories are published on the
// controller: the SlurmUser (the controller hooks, the agent) and root
// (the install's owner: a hook an operator runs by hand), both sending
// what the controller sends.
func (c Controller) SpoolSenders() hooks.SpoolSenders {
	return hooks.SpoolSenders{c.OwnerUID: {hooks.RoleController}, c.UID: {hooks.RoleController}}
}

// MetadataFirewall is the controller's metadata-server rule: root and the
// SlurmUser only (the hooks and the agent publish with the controller's
// credentials).
func (c Controller) MetadataFirewall() node.MetadataFirewall {
	fw := node.MetadataFirewall{Host: node.DefaultMetadataHost}
	if c.UID != 0 {
		fw.Allow = []int{c.UID}
	}
	return fw
}

// Items lists what c installs, parents before children.
func (c Controller) Items() ([]Item, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := c.HooksConfig().Validate(); err != nil {
		return nil, fmt.Errorf("hooks config: %w", err)
	}
	return c.layout(), nil
}

// Installed lists the paths an install with c's SlurmUser and owner
// created, for Remove: no other option needs to be valid.
func (c Controller) Installed() []Item { return c.layout() }

// layout lists c's items, parents before children.
func (c Controller) layout() []Item {
	cfgJSON, _ := json.MarshalIndent(c.HooksConfig(), "", "  ") // plain strings: cannot fail
	ou, og := c.OwnerUID, c.OwnerGID
	items := []Item{
		{Kind: Dir, Path: ConfigDir, Mode: 0o755, UID: ou, GID: og},
		{Kind: File, Path: SpecPath, Mode: 0o644, UID: ou, GID: og, Content: c.Spec},
		{Kind: File, Path: HooksConfigPath, Mode: 0o644, UID: ou, GID: og, Content: append(cfgJSON, '\n')},
		{Kind: Dir, Path: HookDir, Mode: 0o755, UID: ou, GID: og},
	}
	for _, h := range ControllerHooks {
		items = append(items, Item{Kind: Link, Path: HookPath(h), Target: c.Binary})
	}
	// The spool is the owner's (0755); each user that publishes from the
	// controller has its own directory in it (0700): the SlurmUser and
	// root. Others cannot create one (a spool left world-writable by an
	// older version is tightened here).
	items = append(items,
		Item{Kind: Dir, Path: SpoolDir, Mode: 0o755, UID: ou, GID: og},
		Item{Kind: Dir, Path: filepath.Join(SpoolDir, fmt.Sprint(c.UID)), Mode: 0o700, UID: c.UID, GID: c.GID, Private: true})
	if ou != c.UID {
		items = append(items, Item{Kind: Dir, Path: filepath.Join(SpoolDir, fmt.Sprint(ou)), Mode: 0o700, UID: ou, GID: og, Private: true})
	}
	items = append(items,
		Item{Kind: Dir, Path: StateDir, Mode: 0o700, UID: c.UID, GID: c.GID},
		Item{Kind: Dir, Path: LogDir, Mode: 0o755, UID: c.UID, GID: c.GID},
		Item{Kind: Dir, Path: filepath.Dir(UnitPath), Mode: 0o755, Shared: true},
		Item{Kind: File, Path: UnitPath, Mode: 0o644, UID: ou, GID: og, Content: []byte(c.Unit())},
		Item{Kind: File, Path: FirewallUnitPath, Mode: 0o644, UID: ou, GID: og, Content: []byte(c.FirewallUnit())},
	)
	return items
}

// HookPath is the link slurm.conf names for hook name.
func HookPath(name string) string { return filepath.Join(HookDir, slurm.HookLinkPrefix+name) }

// SlurmConfLines are the slurm.conf parameters that run flexslurm's hooks:
// the controller hooks installed here, and the node-side hooks that each
// node's bootstrap installs in node.DefaultHookDir (nodes read the
// controller's slurm.conf in configless mode, docs/node.md), with
// HealthCheckInterval as `flexslurm slurm-conf` prints it by default.
func SlurmConfLines() []string {
	return append(slurm.HookLines(HookDir, node.DefaultHookDir, true), slurm.HealthLines(slurm.DefaultHealthCheckInterval)...)
}

// FirewallUnit is the oneshot unit that applies MetadataFirewall at every
// boot, before the network is up and before slurmctld, the agent or any
// login: iptables rules do not survive a reboot, and a unit of its own
// (rather than an ExecStartPre of the agent, which runs as the SlurmUser
// and restarts on failure) ties the rule to the machine's boot, not to the
// agent's life. Stopping it (uninstall) removes the rule.
func (c Controller) FirewallUnit() string {
	args := ""
	if c.UID != 0 {
		args = fmt.Sprintf(" --allow-uid %d", c.UID)
	}
	var b strings.Builder
	w := func(s string) { b.WriteString(s + "\n") }
	w("# Installed by `flexslurm install controller`; removed by `flexslurm install controller --uninstall`.")
	w("[Unit]")
	w("Description=flexslurm: only root and the SlurmUser reach the metadata server (the controller's credentials)")
	w("DefaultDependencies=no")
	w("After=local-fs.target")
	w("Wants=network-pre.target")
	w("Before=network-pre.target slurmctld.service " + UnitName + " systemd-user-sessions.service")
	w("")
	w("[Service]")
	w("Type=oneshot")
	w("RemainAfterExit=yes")
	w("ExecStart=" + c.Binary + " metadata-firewall" + args)
	w("ExecStop=" + c.Binary + " metadata-firewall --remove" + args)
	w("")
	w("[Install]")
	w("WantedBy=multi-user.target")
	return b.String()
}

// Unit is the agent's systemd unit. The agent runs as the SlurmUser, which
// Slurm lets run every scontrol command the agent needs (node states,
// requeue, reservations), with no capability unless that user is root
// (then only those to flush the spool directories of other users); it
// writes only the spool and its ledger, and is restarted when it fails,
// which includes a missing subscription or role, once the grant has come
// (see docs/slurm.md).
func (c Controller) Unit() string {
	bin := c.SlurmBinDir
	if bin == "" {
		bin = slurm.DefaultBinDir
	}
	ledger := filepath.Join(StateDir, filepath.Base(agent.DefaultLedgerPath))
	var b strings.Builder
	w := func(s string) { b.WriteString(s + "\n") }
	w("# Installed by `flexslurm install controller`; removed by `flexslurm install controller --uninstall`.")
	w("[Unit]")
	w("Description=flexslurm agent: applies flexslurm's Slurm commands, publishes Slurm snapshots")
	w("Wants=network-online.target")
	w("After=network-online.target munge.service slurmctld.service")
	w("StartLimitIntervalSec=0")
	w("")
	w("[Service]")
	w("Type=simple")
	w("User=" + c.SlurmUser) // and its primary group
	w(fmt.Sprintf("ExecStart=%s agent --spec %s --project %s --spool %s --ledger %s --slurm-bin %s",
		c.Binary, SpecPath, c.Project, SpoolDir, ledger, bin))
	if c.SlurmConf != "" && c.SlurmConf != slurm.DefaultConfPath {
		w("Environment=SLURM_CONF=" + c.SlurmConf)
	}
	w("Restart=on-failure")
	w("RestartSec=30s")
	w("UMask=0077")
	if c.UID == 0 {
		w("CapabilityBoundingSet=CAP_DAC_OVERRIDE CAP_FOWNER")
	} else {
		w("CapabilityBoundingSet=")
	}
	w("AmbientCapabilities=")
	w("NoNewPrivileges=yes")
	w("ProtectSystem=strict")
	w("ReadWritePaths=" + SpoolDir + " " + StateDir)
	w("ProtectHome=yes")
	w("PrivateTmp=yes")
	w("PrivateDevices=yes")
	w("ProtectKernelTunables=yes")
	w("ProtectKernelModules=yes")
	w("ProtectKernelLogs=yes")
	w("ProtectControlGroups=yes")
	w("ProtectClock=yes")
	w("ProtectHostname=yes")
	w("RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6")
	w("RestrictNamespaces=yes")
	w("RestrictRealtime=yes")
	w("RestrictSUIDSGID=yes")
	w("LockPersonality=yes")
	w("MemoryDenyWriteExecute=yes")
	w("SystemCallArchitectures=native")
	w("")
	w("[Install]")
	w("WantedBy=multi-user.target")
	return b.String()
}
