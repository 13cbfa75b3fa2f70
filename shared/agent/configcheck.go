package agent

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/text"
)

// DefaultConfigHookDir is the controller's hook directory, which the
// generated slurm.conf lines name (install.HookDir is this directory).
const DefaultConfigHookDir = "/usr/local/libexec/flexslurm"

// configRepeat is how often (wall time) unchanged divergences are logged
// again at error level.
const configRepeat = time.Hour

// ConfigChecker compares the agent's cluster spec with the configuration
// slurmctld runs with (slurm.Runner.LiveConf, slurm.Diverge), so that a
// spec Slurm cannot serve (a pool grown beyond its NodeName lines, GPUs,
// partition limits) is reported with exactly the slurm.conf lines to
// change instead of silently leaving jobs pending.
type ConfigChecker struct {
	cluster string
	sha     string
	gen     *slurm.Generated

	checked  bool
	last     string    // the divergences last logged, joined
	lastLog  time.Time // when (wall time)
	repeated time.Duration
}

// NewConfigChecker prepares the comparison of spec c: gen are the options
// of the lines it prints as fixes (`flexslurm slurm-conf`'s; HookDir
// DefaultConfigHookDir and DefaultTime an hour when unset).
func NewConfigChecker(c *spec.Cluster, gen slurm.GenOptions) (*ConfigChecker, error) {
	if gen.HookDir == "" {
		gen.HookDir = DefaultConfigHookDir
	}
	if gen.DefaultTime == 0 {
		gen.DefaultTime = time.Hour
	}
	gen.Configless = true
	eff, err := c.EffectiveJSON()
	if err != nil {
		return nil, fmt.Errorf("comparing with Slurm's configuration: %w", err)
	}
	g, err := slurm.Generate(c, gen)
	if err != nil {
		return nil, fmt.Errorf("comparing with Slurm's configuration: %w", err)
	}
	return &ConfigChecker{cluster: c.ID, sha: spec.EffectiveSHA256(eff), gen: g, repeated: configRepeat}, nil
}

// Compare compares the spec with have (Slurm's live configuration).
func (k *ConfigChecker) Compare(have slurm.ConfView) *event.ConfigCheck {
	cc := &event.ConfigCheck{SpecSHA256: k.sha}
	for i, d := range slurm.Diverge(k.gen, k.cluster, have) {
		if i == event.MaxConfigDivergences {
			break
		}
		cc.Divergences = append(cc.Divergences, event.ConfigDivergence{
			Problem: text.Truncate(d.Problem, event.MaxConfigDivergenceText), Fix: text.Truncate(d.Fix, event.MaxConfigDivergenceText)})
	}
	return cc
}

// Check reads Slurm's live configuration, compares it and logs the
// result: every divergence at error level when they change (and again
// every hour while they last), once at info level when they are gone.
func (k *ConfigChecker) Check(ctx context.Context, r *slurm.Runner, log *slog.Logger) (*event.ConfigCheck, error) {
	have, err := r.LiveConf(ctx)
	if err != nil {
		return nil, err
	}
	cc := k.Compare(have)
	k.report(cc, time.Now(), log)
	return cc, nil
}

// report logs cc: every divergence at error level when they changed since
// the last report (and again every hour, wall time, while they last), and
// once at info level when there is none.
func (k *ConfigChecker) report(cc *event.ConfigCheck, now time.Time, log *slog.Logger) {
	var lines []string
	for _, d := range cc.Divergences {
		lines = append(lines, d.Problem+": "+d.Fix)
	}
	joined := strings.Join(lines, "\n")
	changed := !k.checked || joined != k.last
	due := joined != "" && now.Sub(k.lastLog) >= k.repeated
	if !changed && !due {
		return
	}
	if joined == "" {
		log.Info("Slurm's configuration serves the cluster spec", "spec_sha256", k.sha)
	}
	for _, d := range cc.Divergences {
		log.Error("Slurm's configuration cannot serve the cluster spec: change slurm.conf", "problem", d.Problem, "fix", d.Fix, "spec_sha256", k.sha)
	}
	k.checked, k.last, k.lastLog = true, joined, now
}
