package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	flexslurm "github.com/flexslurm/flexslurm"
)

// entryPoints lists the registered entry points, as deployed.
var entryPoints = []string{flexslurm.EntryScaleUp, flexslurm.EntryExpiry, flexslurm.EntryRepair, flexslurm.EntryReconcile, flexslurm.EntryAPI}

const functionUsage = "usage: flexslurm function serve --target NAME [--host H] [--port P]"

func cmdFunction(args []string, stdout, stderr io.Writer) int {
	if code, ok := subcommand("function", args, stdout, stderr, func(w io.Writer) { fmt.Fprintln(w, functionUsage) }); !ok {
		return code
	}
	fs := flag.NewFlagSet("function serve", flag.ContinueOnError)
	target := fs.String("target", os.Getenv("FUNCTION_TARGET"), "entry point to serve: ScaleUp, Expiry, Repair, Reconcile or API")
	host := fs.String("host", "127.0.0.1", "address to listen on")
	port := fs.String("port", envOr("PORT", "8080"), "port to listen on")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), functionUsage+"\n\nServes one entry point with functions-framework-go exactly as Cloud Functions\ndoes (FUNCTION_TARGET, at path /), configured from the environment\n(GOOGLE_CLOUD_PROJECT, FIRESTORE_EMULATOR_HOST, PUBSUB_EMULATOR_HOST,\nFLEXSLURM_COMPUTE_ENDPOINT, FLEXSLURM_CLOCK, …).")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args[1:], stdout, stderr); done {
		return code
	}
	if noArgs(fs, stderr) {
		return 2
	}
	known := false
	for _, e := range entryPoints {
		known = known || e == *target
	}
	if !known {
		fmt.Fprintf(stderr, "flexslurm function serve: --target %q is not one of %v\n", *target, entryPoints)
		return 2
	}
	os.Setenv("FUNCTION_TARGET", *target)
	if err := funcframework.StartHostPort(*host, *port); err != nil {
		fmt.Fprintf(stderr, "flexslurm function serve: %v\n", err)
		return 1
	}
	return 0
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
