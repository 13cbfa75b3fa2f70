package local

import (
	"context"
	"errors"

	"github.com/flexslurm/flexslurm/shared/slurm"
)

// What a benchmark driving the local system (dev/reactbench) reads of its
// Slurm: the same commands a user runs, and slurmctld's own log.

// errNoSlurm is returned by the Slurm accessors of a system run without Slurm.
var errNoSlurm = errors.New("the local system runs without Slurm (NoSlurm)")

// SlurmRunner returns the runner of the local Slurm's commands (scontrol,
// sbatch, …), or nil without Slurm.
func (s *System) SlurmRunner() *slurm.Runner {
	if ss := s.slurm.Load(); ss != nil {
		return ss.r
	}
	return nil
}

// SlurmctldLog returns the path of slurmctld's log (SlurmctldLogFile), ""
// without Slurm.
func (s *System) SlurmctldLog() string {
	if ss := s.slurm.Load(); ss != nil {
		return slurm.LocalCtldLog(ss.lc.Root)
	}
	return ""
}

// Sbatch submits a batch job as a user would (sbatch --parsable ARGS
// --wrap SCRIPT) and returns its id.
func (s *System) Sbatch(ctx context.Context, script string, args ...string) (string, error) {
	ss := s.slurm.Load()
	if ss == nil {
		return "", errNoSlurm
	}
	return ss.sbatch(ctx, script, args...)
}

// SlurmHookLogDir returns the directory of the controller-side hooks' logs
// (hooks-USER.log, one JSON line per record), "" without Slurm.
func (s *System) SlurmHookLogDir() string {
	if ss := s.slurm.Load(); ss != nil {
		return ss.lc.HookLogDir()
	}
	return ""
}
