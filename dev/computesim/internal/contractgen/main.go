// Command contractgen writes the simulator's API contract: the methods the
// Compute simulator serves, and the schemas they reach, extracted from the
// Compute v1 discovery document of the google.golang.org/api version that
// go.mod requires. dev/computesim runs it with go generate:
//
//	go run ./internal/contractgen -o contract.json
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/flexslurm/flexslurm/dev/computesim/internal/contract"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "contractgen:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("contractgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "output file (required)")
	fs.Usage = func() {
		fmt.Fprintln(stdout, "usage: contractgen -o FILE\n\nWrites the Compute simulator's contract, extracted from the Compute v1\ndiscovery document of the google.golang.org/api module go.mod requires.")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("-o FILE is required and no arguments are taken")
	}
	path, version, err := contract.Locate(".")
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading discovery document: %w", err)
	}
	b, err := contract.Extract(doc, contract.SourceOf(version), contract.Served)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	return nil
}
