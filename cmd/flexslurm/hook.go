package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/flexslurm/flexslurm/shared/hooks"
	"github.com/flexslurm/flexslurm/shared/slurm"
)

func init() {
	commands["hook"] = command{"run a Slurm hook: resume, suspend, resume-fail, prolog-ctld, epilog-ctld, prolog, epilog, healthcheck", cmdHook}
	subcommands["hook"] = slurm.HookNames
	// Slurm runs hook programs with no arguments of our choosing, so each
	// hook is a link named flexslurm-hook-NAME to this binary: run as such,
	// it is `flexslurm hook NAME ARGS…`.
	if name, ok := strings.CutPrefix(filepath.Base(os.Args[0]), slurm.HookLinkPrefix); ok && name != "" {
		os.Args = append([]string{os.Args[0], "hook", name}, os.Args[1:]...)
	}
}

func cmdHook(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return hooks.Command(ctx, args, os.Args[0], os.Getenv, stdout, stderr)
}
