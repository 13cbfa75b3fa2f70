package api_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/store"
)

// chromium returns the headless browser, or skips the test loudly.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "SKIP (loud): no chromium for the status page's browser test: apt-get install chromium"
	if os.Getenv("FLEXSLURM_REQUIRE_CHROMIUM") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// TestStatusPageInChromium renders the status page in headless Chromium
// over the example cluster once its static node nears the end of its run
// duration and a successor was asked for: the timeline shows the static
// node, when it ends, and its successor. The screenshot is kept in
// $FLEXSLURM_ARTIFACTS (CI) or the test's temporary directory.
func TestStatusPageInChromium(tt *testing.T) {
	browser := chromium(tt)
	e := newEnv(tt)
	e.runStatic()
	// Up to a few hours before its end, then in steps of a quarter hour:
	// the successor is asked for a lead time ahead (make-before-break).
	st, err := e.h.Store.Read(e.ctx, store.Scope{Cluster: "flexvm", AllPools: true})
	if err != nil {
		tt.Fatal(err)
	}
	end := st.Nodes["flexvm-a3u-0"].TerminationTime
	if end.IsZero() {
		tt.Fatal("the static node's VM has no termination time")
	}
	if err := e.h.Advance(e.ctx, end.Add(-6*time.Hour).Sub(e.h.Clock.Now())); err != nil {
		tt.Fatal(err)
	}
	succ := ""
	for i := 0; i < 24 && succ == ""; i++ {
		if err := e.h.Advance(e.ctx, 15*time.Minute); err != nil {
			tt.Fatal(err)
		}
		if err := e.h.Tick(e.ctx); err != nil {
			tt.Fatal(err)
		}
		st, err := e.h.Store.Read(e.ctx, store.Scope{Cluster: "flexvm", AllPools: true})
		if err != nil {
			tt.Fatal(err)
		}
		succ = st.Nodes["flexvm-a3u-0"].Successor
	}
	if succ == "" {
		tt.Fatal("the static node never got a successor")
	}
	srv := httptest.NewServer(e.srv)
	defer srv.Close()

	dir := os.Getenv("FLEXSLURM_ARTIFACTS")
	if dir == "" {
		dir = tt.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tt.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := func(args ...string) []byte {
		tt.Helper()
		base := []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
			"--user-data-dir=" + tt.TempDir(), "--virtual-time-budget=8000", "--window-size=1280,1000"}
		cmd := exec.CommandContext(ctx, browser, append(base, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			tt.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
		}
		return out.Bytes()
	}
	dom := string(run("--dump-dom", srv.URL+"/"))
	if !strings.Contains(dom, `data-loaded="true"`) {
		tt.Fatalf("the page did not load the clusters:\n%s", dom)
	}
	static := regexp.MustCompile(`<g class="node" data-node="flexvm-a3u-0" data-state="[A-Z]+" data-successor="` + regexp.QuoteMeta(succ) + `" data-end="[^"]+">`)
	if !static.MatchString(dom) {
		tt.Fatalf("the timeline does not show flexvm-a3u-0 ending, with successor %s:\n%s", succ, dom)
	}
	if !strings.Contains(dom, `data-node="`+succ+`"`) || !strings.Contains(dom, "ends ") || !strings.Contains(dom, "→ "+succ) {
		tt.Fatalf("the timeline does not show the successor %s:\n%s", succ, dom)
	}
	// The cluster's events are listed beside it: the static node's first
	// VM was requested.
	if !strings.Contains(dom, `<tr data-event="VM_REQUESTED">`) {
		tt.Fatalf("the page lists no VM_REQUESTED event:\n%s", dom)
	}
	shot := filepath.Join(dir, "status-page.png")
	run("--screenshot="+shot, srv.URL+"/")
	b, err := os.ReadFile(shot)
	if err != nil || len(b) < 1000 || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		tt.Fatalf("screenshot %s: %d bytes, %v", shot, len(b), err)
	}
	tt.Logf("status page screenshot: %s", shot)
}
