package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/flexslurm/flexslurm/shared/cli"
	"github.com/flexslurm/flexslurm/shared/version"
)

func init() {
	commands["version"] = command{"print flexslurm's version, commit and build date (also --version)", cmdVersion}
}

func cmdVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: flexslurm version
       flexslurm --version

Prints the module version, the Git commit and the build date this binary was
built from, and its Go toolchain and platform. A node's bootstrap compares its
own version with the one of the functions that built its instance template
(deploy/README.md, "Versions").`)
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if noArgs(fs, stderr) {
		return cli.ExitUsage
	}
	fmt.Fprintln(stdout, version.Get())
	return 0
}
