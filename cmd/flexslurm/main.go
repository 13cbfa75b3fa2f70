// Command flexslurm is flexslurm's command-line tool: it validates and
// applies cluster specs, runs the whole system locally (emulators, Compute
// simulator, the four functions), serves one function the way Cloud
// Functions does, and runs the Compute simulator on its own.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{
	"validate":    {"validate a cluster_config.json and print the effective spec", cmdValidate},
	"apply":       {"validate a cluster spec and publish it (cluster created or resized)", cmdApply},
	"local":       {"run the whole system on this machine (--demo: the seed's lifecycle, checked)", cmdLocal},
	"compute-sim": {"run the Compute Engine simulator", cmdComputeSim},
	"emulators":   {"start the Firestore and Pub/Sub emulators (run -- CMD: around a command)", cmdEmulators},
	"function":    {"serve one function with functions-framework (function serve --target NAME)", cmdFunction},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "flexslurm: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return c.run(args[1:], stdout, stderr)
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
	fmt.Fprintln(w, "\nRun 'flexslurm COMMAND -h' for a command's flags.")
}

// joinLines indents a multi-line message.
func joinLines(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}
