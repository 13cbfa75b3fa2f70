// Package cli is how every flexslurm command parses its flags, so that all
// of them behave alike: -h, -help or --help prints the usage on standard
// output and exits 0; a flag that does not parse prints the error and the
// usage on standard error and exits 2; an argument a command does not take
// is an error naming it.
package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
)

// ExitUsage is the exit status of a usage error.
const ExitUsage = 2

// Parse parses args with fs. It reports done when the command must stop
// there, with code its exit status: 0 after printing the usage asked for
// with -h, -help or --help (on stdout), ExitUsage after a flag error (the
// error and the usage on stderr). fs.Usage must write to fs.Output(); on
// return fs's output is stderr.
func Parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	// flag.FlagSet.Parse prints the error and the usage itself, to the
	// output: hold them until it is known whether they were asked for.
	var held bytes.Buffer
	fs.SetOutput(&held)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(stderr)
		return 0, true
	case err != nil:
		stderr.Write(held.Bytes())
		return ExitUsage, true
	}
	return 0, false
}

// NoArgs reports an argument left after the flags of a command that takes
// none: it prints an error naming it on stderr and returns true.
func NoArgs(name string, fs *flag.FlagSet, stderr io.Writer) bool {
	if fs.NArg() == 0 {
		return false
	}
	fmt.Fprintf(stderr, "%s: unexpected argument %q (it takes no arguments; flags go before any argument; see -h)\n", name, fs.Arg(0))
	return true
}

// IsHelp reports whether arg asks for the usage.
func IsHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}
