package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/inputs"
	"github.com/flexslurm/flexslurm/shared/text"
)

// Verdicts of a health check.
const (
	VerdictPass         = "PASS"
	VerdictFail         = "FAIL"
	VerdictInconclusive = "INCONCLUSIVE"
)

// CheckFunc runs a node health check and returns its verdict (VerdictPass,
// VerdictFail or VerdictInconclusive) and, for a failure, the reasons (at
// most event.MaxHealthReasons, each at most event.MaxHealthReasonBytes).
// VerdictFail drains the node and is repaired; VerdictInconclusive is
// reported without draining (repeated ones drain the node for diagnosis).
type CheckFunc func(ctx context.Context) (verdict string, reasons []string)

// PassCheck is the check used when none is configured: it always passes.
func PassCheck(context.Context) (string, []string) { return VerdictPass, nil }

// CommandCheck returns a CheckFunc that runs argv (absolute program path
// first, no shell) with env as its whole environment, bounded by timeout.
// Exit status 0 is PASS, 1 FAIL, anything else — including a program that
// cannot start or overruns — INCONCLUSIVE. The reasons are the "reasons" of
// a JSON object on stdout (the output of `flexslurm health check`), or else
// its non-empty lines, bounded like a health.failure event's; a FAIL without
// any gets "check command exited with status 1".
func CommandCheck(argv []string, env []string, timeout time.Duration) CheckFunc {
	return func(ctx context.Context) (string, []string) {
		if len(argv) == 0 {
			return VerdictPass, nil
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = env
		if cmd.Env == nil {
			cmd.Env = []string{}
		}
		cmd.WaitDelay = time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout = &limited{b: &stdout, max: 1 << 20}
		cmd.Stderr = &limited{b: &stderr, max: 64 << 10}
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return VerdictPass, nil
		case ctx.Err() != nil:
			return VerdictInconclusive, []string{fmt.Sprintf("check command %s did not finish within %v", argv[0], timeout)}
		case errors.As(err, &ee) && ee.Exited() && ee.ExitCode() == 1:
			reasons := checkReasons(stdout.Bytes())
			if len(reasons) == 0 {
				reasons = []string{fmt.Sprintf("check command %s exited with status 1", argv[0])}
			}
			return VerdictFail, reasons
		default:
			return VerdictInconclusive, []string{fmt.Sprintf("check command %s: %v: %s", argv[0], err,
				strings.TrimSpace(stderr.String()))}
		}
	}
}

// checkReasons extracts failure reasons from a check's stdout.
func checkReasons(out []byte) []string {
	var doc struct {
		Reasons []string `json:"reasons"`
	}
	var raw []string
	if t := bytes.TrimSpace(out); len(t) > 0 && t[0] == '{' && json.Unmarshal(t, &doc) == nil {
		raw = doc.Reasons
	} else {
		raw = append(raw, strings.Split(string(out), "\n")...)
	}
	return BoundReasons(raw)
}

// BoundReasons trims reasons, drops empty ones, makes them valid UTF-8 and
// bounds them to event.MaxHealthReasons of event.MaxHealthReasonBytes each.
func BoundReasons(in []string) []string {
	var out []string
	for _, r := range in {
		// One line each: a reason becomes the node's drain reason in
		// Slurm (scontrol update … reason=), where a newline would end a
		// line of `scontrol show node -o` for whoever parses it.
		r = strings.TrimSpace(inputs.OneLine(strings.ToValidUTF8(r, "?")))
		if r == "" {
			continue
		}
		if len(out) == event.MaxHealthReasons {
			break
		}
		out = append(out, text.Truncate(r, event.MaxHealthReasonBytes))
	}
	return out
}

type limited struct {
	b   *bytes.Buffer
	max int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
