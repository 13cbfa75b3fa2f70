package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/flexslurm/flexslurm/shared/clock"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/slurm"
)

// Where the hooks find their configuration. Slurm runs a hook with the
// hostlist as its only argument and almost no environment, so settings are
// baked into a file: the first of
//
//  1. the --config flag;
//  2. the file named by FLEXSLURM_HOOKS_CONFIG;
//  3. hooks.json beside the hook link, when the program runs as a link
//     named flexslurm-hook-NAME (the layout `flexslurm local` writes). The
//     link's directory comes from argv[0] when it is absolute, else from
//     the hook's parameter in slurm.conf ($SLURM_CONF or
//     /etc/slurm/slurm.conf): slurmctld passes only the program's base
//     name as argv[0] to ResumeProgram, SuspendProgram and
//     ResumeFailProgram;
//  4. DefaultConfigPath.
const (
	DefaultConfigPath = "/etc/flexslurm/hooks.json"
	EnvConfig         = "FLEXSLURM_HOOKS_CONFIG"
	// EnvVMName names the VM a node-side hook runs on ("<node>-g<gen>"),
	// for manual runs; see Config.VMNameDir.
	EnvVMName = "FLEXSLURM_VM_NAME"
	// ConfigFileName is the file looked for beside a hook link.
	ConfigFileName = "hooks.json"
)

// Defaults of Config.
const (
	DefaultSpoolDir       = "/var/spool/flexslurm"
	DefaultPublishTimeout = 700 * time.Millisecond
	DefaultCheckTimeout   = 120 * time.Second
	maxConfigBytes        = 1 << 20
)

// Duration is a time.Duration written in JSON as a Go duration string
// ("700ms", "2m").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"700ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Topics names the Pub/Sub topics the hooks publish to.
type Topics struct {
	// Jobs receives job.* and node.* events: config.TopicJobs when empty.
	Jobs string `json:"jobs,omitempty"`
	// Health receives health.failure events: config.TopicHealthFailure
	// when empty.
	Health string `json:"health,omitempty"`
	// Results receives the agent's slurm.command_result events, which it
	// spools beside the controller hooks' messages:
	// config.TopicCommandResults when empty.
	Results string `json:"results,omitempty"`
}

// Config is the hooks' configuration file (JSON, unknown fields rejected):
//
//	{
//	  "cluster": "flexvm",
//	  "project": "my-project",
//	  "spec": "/etc/flexslurm/cluster_config.json",
//	  "spool_dir": "/var/spool/flexslurm",
//	  "log_dir": "/var/log/flexslurm",
//	  "pubsub_emulator_host": "127.0.0.1:8085",
//	  "publish_timeout": "700ms",
//	  "slurm_bin_dir": "/usr/bin",
//	  "topics": {"jobs": "job-pending", "health": "health-failure"},
//	  "check_cmd": ["/usr/local/bin/flexslurm", "health", "check", "--accelerator-count", "8"],
//	  "check_timeout": "120s",
//	  "vm_name_dir": "/run/flexslurm/vm",
//	  "prolog_ctld_wait_ready": "0s"
//	}
//
// Only cluster and project are required.
type Config struct {
	// Cluster is the cluster id; node names are "<cluster>-<pool>-<index>".
	Cluster string `json:"cluster"`
	// Project is the Google Cloud project of the Pub/Sub topics.
	Project string `json:"project"`
	// Spec is the cluster spec (cluster_config.json). When set, node names
	// are checked against its Flex-Start pools and indexes, and job
	// partitions are derived from it; otherwise only the cluster prefix is
	// checked.
	Spec string `json:"spec,omitempty"`
	// SpoolDir keeps the messages not yet published, one file per message,
	// in a subdirectory per user id (Spool); DefaultSpoolDir when empty.
	// The root is 0755, each user's directory 0700 and that user's,
	// created by the bootstrap (node) or `flexslurm install controller`.
	SpoolDir string `json:"spool_dir,omitempty"`
	// SpoolSenders names the users whose spool directories are published
	// (by uid) and what each may send: "node" (health.failure to the
	// health topic) or "controller" (job.* , node.suspend and
	// node.resume_failed to the jobs topic, slurm.command_result to the
	// results topic), e.g. {"0": ["node"]}. The bootstrap and
	// `flexslurm install controller` write it. Empty: nothing is published
	// from the spool (messages are still published when they are sent).
	SpoolSenders SpoolSenders `json:"spool_senders,omitempty"`
	// LogDir, when set, receives each user's hook log as
	// hooks-<user>.log (JSON lines) besides stderr, which Slurm discards
	// for most hooks.
	LogDir string `json:"log_dir,omitempty"`
	// PubSubEmulatorHost points publishing at a Pub/Sub emulator
	// (host:port): hooks do not inherit PUBSUB_EMULATOR_HOST.
	PubSubEmulatorHost string `json:"pubsub_emulator_host,omitempty"`
	// MetadataHost is the metadata server (host:port) the hooks fetch
	// their VM's identity token from for every message they publish;
	// empty is Compute Engine's (or GCE_METADATA_HOST's). The local
	// system points it at its simulated VMs and controller.
	MetadataHost string `json:"metadata_host,omitempty"`
	// PublishTimeout bounds the publishing of one hook run; what is not
	// acknowledged by then stays spooled. DefaultPublishTimeout when zero.
	PublishTimeout Duration `json:"publish_timeout,omitempty"`
	// SlurmBinDir holds scontrol and squeue; slurm.DefaultBinDir when
	// empty.
	SlurmBinDir string `json:"slurm_bin_dir,omitempty"`
	// Topics overrides the topic ids.
	Topics Topics `json:"topics,omitzero"`
	// CheckCmd is the node health check run by the prolog, epilog and
	// healthcheck hooks: an absolute program path and its arguments, run
	// without a shell. Exit status 0 is PASS, 1 FAIL, anything else
	// INCONCLUSIVE (never acted on). Its stdout gives the reasons: the
	// "reasons" of a JSON object (`flexslurm health check` prints one), or
	// else its non-empty lines. Empty: every check passes. "%n" in an
	// argument is replaced by the node name (SLURMD_NODENAME).
	CheckCmd []string `json:"check_cmd,omitempty"`
	// CheckTimeout bounds the check; an overrun is INCONCLUSIVE.
	// DefaultCheckTimeout when zero.
	CheckTimeout Duration `json:"check_timeout,omitempty"`
	// VMNameDir holds one file per node, named after the node, containing
	// the name of the VM that runs it ("<node>-g<generation>"), written by
	// whatever starts slurmd. The node-side hooks report that VM and its
	// generation with a health failure.
	VMNameDir string `json:"vm_name_dir,omitempty"`
	// PrologCtldWaitReady, when positive, makes PrologSlurmctld wait (at
	// most that long) until the job's nodes have registered, so that a
	// batch job on freshly resumed nodes starts at once instead of at
	// slurmctld's next 30 s check. For tests and demos on one host.
	PrologCtldWaitReady Duration `json:"prolog_ctld_wait_ready,omitempty"`
	// Clock, in the local system only, is its simulated clock
	// (FLEXSLURM_CLOCK's form, shared/clock Scaled): events are stamped on
	// it, as the functions judge them on it. Empty: the wall clock.
	Clock string `json:"clock,omitempty"`
	// LogLevel is DEBUG, INFO, WARN or ERROR; INFO when empty.
	LogLevel string `json:"log_level,omitempty"`
}

var clusterRE = regexp.MustCompile(`^[a-z][a-z0-9]{0,9}$`)

// withDefaults fills the defaults in.
func (c Config) withDefaults() Config {
	if c.SpoolDir == "" {
		c.SpoolDir = DefaultSpoolDir
	}
	if c.PublishTimeout <= 0 {
		c.PublishTimeout = Duration(DefaultPublishTimeout)
	}
	if c.CheckTimeout <= 0 {
		c.CheckTimeout = Duration(DefaultCheckTimeout)
	}
	if c.SlurmBinDir == "" {
		c.SlurmBinDir = slurm.DefaultBinDir
	}
	if c.Topics.Jobs == "" {
		c.Topics.Jobs = config.TopicJobs
	}
	if c.Topics.Health == "" {
		c.Topics.Health = config.TopicHealthFailure
	}
	if c.Topics.Results == "" {
		c.Topics.Results = config.TopicCommandResults
	}
	return c
}

// SpoolPolicy is what the spool publishes under this configuration.
func (c Config) SpoolPolicy() SpoolPolicy {
	c = c.withDefaults()
	return SpoolPolicy{Senders: c.SpoolSenders,
		Topics: SpoolTopics{Jobs: c.Topics.Jobs, Health: c.Topics.Health, Results: c.Topics.Results}}
}

// Validate reports every problem of the configuration.
func (c Config) Validate() error {
	var errs []error
	if !clusterRE.MatchString(c.Cluster) {
		errs = append(errs, fmt.Errorf("cluster %q is not a cluster id (^[a-z][a-z0-9]{0,9}$)", c.Cluster))
	}
	if c.Project == "" {
		errs = append(errs, errors.New("project is required"))
	}
	for name, p := range map[string]string{"spec": c.Spec, "spool_dir": c.SpoolDir, "log_dir": c.LogDir,
		"slurm_bin_dir": c.SlurmBinDir, "vm_name_dir": c.VMNameDir} {
		if p != "" && !filepath.IsAbs(p) {
			errs = append(errs, fmt.Errorf("%s %q must be an absolute path (hooks run in slurmctld's directory)", name, p))
		}
	}
	if c.MetadataHost != "" {
		if h, p, err := net.SplitHostPort(c.MetadataHost); err != nil || h == "" || p == "" {
			errs = append(errs, fmt.Errorf("metadata_host %q is not host:port", c.MetadataHost))
		}
	}
	if err := c.SpoolSenders.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Clock != "" {
		if _, err := clock.ParseScaled(c.Clock); err != nil {
			errs = append(errs, fmt.Errorf("clock %q: %w", c.Clock, err))
		}
	}
	if len(c.CheckCmd) > 0 && !filepath.IsAbs(c.CheckCmd[0]) {
		errs = append(errs, fmt.Errorf("check_cmd program %q must be an absolute path (hooks run without PATH)", c.CheckCmd[0]))
	}
	if c.PublishTimeout < 0 || c.CheckTimeout < 0 || c.PrologCtldWaitReady < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if c.LogLevel != "" {
		switch strings.ToUpper(c.LogLevel) {
		case "DEBUG", "INFO", "WARN", "ERROR":
		default:
			errs = append(errs, fmt.Errorf("log_level %q is not DEBUG, INFO, WARN or ERROR", c.LogLevel))
		}
	}
	return errors.Join(errs...)
}

// ConfigPath returns the configuration file to read, following the order
// documented above: flag, then FLEXSLURM_HOOKS_CONFIG, then hooks.json
// beside a flexslurm-hook-NAME link (when it exists), then
// DefaultConfigPath.
func ConfigPath(flagPath, argv0 string, getenv func(string) string) string {
	if flagPath != "" {
		return flagPath
	}
	if p := getenv(EnvConfig); p != "" {
		return p
	}
	base := filepath.Base(argv0)
	if name, ok := strings.CutPrefix(base, slurm.HookLinkPrefix); ok {
		link := argv0
		if !filepath.IsAbs(link) {
			conf := getenv("SLURM_CONF")
			if conf == "" {
				conf = slurm.DefaultConfPath
			}
			if b, err := os.ReadFile(conf); err == nil {
				if prog := slurm.ConfValue(b, slurm.HookParam(name)); filepath.Base(prog) == base {
					link = prog
				}
			}
		}
		if filepath.IsAbs(link) {
			p := filepath.Join(filepath.Dir(link), ConfigFileName)
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	return DefaultConfigPath
}

// LoadConfig reads a configuration file. A missing file is an error
// wrapping fs.ErrNotExist.
func LoadConfig(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("reading hook config %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return Config{}, fmt.Errorf("reading hook config %s: %w", path, err)
	}
	if len(b) > maxConfigBytes {
		return Config{}, fmt.Errorf("hook config %s is larger than %d bytes", path, maxConfigBytes)
	}
	var c Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("parsing hook config %s: %w", path, err)
	}
	return c, nil
}

// WriteConfig writes c to path as indented JSON, atomically, mode 0644.
func WriteConfig(path string, c Config) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding hook config: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing hook config %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing hook config %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing hook config %s: %w", path, err)
	}
	return nil
}
