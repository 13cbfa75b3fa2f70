// Command flexslurm is flexslurm's command-line tool: it validates and
// applies cluster specs, runs the whole system locally (emulators, Compute
// simulator, the four functions), serves one function the way Cloud
// Functions does, and runs the Compute simulator on its own.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/flexslurm/flexslurm/shared/cli"
)

type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{
	"validate":    {"validate a cluster_config.json and print the effective spec", cmdValidate},
	"apply":       {"validate a cluster spec and publish it (cluster created or resized)", cmdApply},
	"local":       {"run the whole system on this machine (--demo: a node's whole lifecycle, checked)", cmdLocal},
	"compute-sim": {"run the Compute Engine simulator", cmdComputeSim},
	"emulators":   {"start the Firestore and Pub/Sub emulators (run -- CMD: around a command)", cmdEmulators},
	"function":    {"serve one function with functions-framework (function serve --target NAME)", cmdFunction},
}

// subcommands names, for each command that has sub-commands (function
// serve, emulators run, …), the words that may follow it. Each such command
// checks its first argument against it (see subcommand), and the tests run
// every one of them.
var subcommands = map[string][]string{
	"emulators": {"run", "start"},
	"function":  {"serve"},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return cli.ExitUsage
	}
	if cli.IsHelp(args[0]) {
		usage(stdout)
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		return cmdVersion(args[1:], stdout, stderr)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "flexslurm: unknown command %q\n\n", args[0])
		usage(stderr)
		return cli.ExitUsage
	}
	return c.run(args[1:], stdout, stderr)
}

// parseFlags parses a command's flags: -h, -help or --help prints its usage
// on stdout and exits 0, a flag error prints the error and the usage on
// stderr and exits 2 (done is then true and code the exit status). The
// command's fs.Usage must write to fs.Output().
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	return cli.Parse(fs, args, stdout, stderr)
}

// noArgs reports (on stderr) an argument given to a command that takes none.
func noArgs(fs *flag.FlagSet, stderr io.Writer) bool {
	return cli.NoArgs("flexslurm "+fs.Name(), fs, stderr)
}

// subcommand checks the sub-command word args[0] of command name against
// subcommands[name]: none, or one the command does not have, is a usage
// error (usage on stderr, exit 2); -h, -help, --help or help prints the
// usage on stdout, exit 0. ok means args[0] is one of the command's
// sub-commands.
func subcommand(name string, args []string, stdout, stderr io.Writer, usage func(io.Writer)) (code int, ok bool) {
	switch {
	case len(args) == 0:
		usage(stderr)
		return cli.ExitUsage, false
	case cli.IsHelp(args[0]):
		usage(stdout)
		return 0, false
	case !slices.Contains(subcommands[name], args[0]):
		fmt.Fprintf(stderr, "flexslurm %s: unknown sub-command %q (want %s)\n\n", name, args[0], strings.Join(subcommands[name], " or "))
		usage(stderr)
		return cli.ExitUsage, false
	}
	return 0, true
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: flexslurm COMMAND [ARGS]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'flexslurm COMMAND -h' for a command's flags, 'flexslurm --version' for the version.")
}

// joinLines indents a multi-line message.
func joinLines(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}
