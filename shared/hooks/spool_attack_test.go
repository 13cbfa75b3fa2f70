package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/slurm"
)

// The attacker of these tests is nobody (65534): a user with a login and
// jobs, and no business in the spool.
const nobodyUID = 65534

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP (loud): needs root: the attack plants files as another user and the flusher reads as root (CI runs as root)")
	}
}

// publicDir is a directory every user can traverse (t.TempDir is 0700).
func publicDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "flexslurm-spool-attack-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// asNobody runs the command as nobody, with runuser.
func asNobody(t *testing.T, prog string, args ...string) ([]byte, error) {
	t.Helper()
	if _, err := os.Stat("/usr/sbin/runuser"); err != nil {
		t.Skip("SKIP (loud): needs /usr/sbin/runuser to act as nobody")
	}
	return exec.Command("/usr/sbin/runuser", append([]string{"-u", "nobody", "--", prog}, args...)...).CombinedOutput()
}

// spoolFile is a spool file's content for m.
func spoolFile(t *testing.T, m Message) []byte {
	t.Helper()
	b, err := json.Marshal(spooled{Message: m, SpooledAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// payload is an event of type typ for cluster flexvm, valid as far as
// PeekHeader sees.
func payload(typ string) []byte {
	b, _ := json.Marshal(map[string]any{"version": event.SchemaVersion, "type": typ, "cluster": "flexvm", "job_id": "1"})
	return b
}

// captured is a logger whose output the test reads.
func captured() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

// mkOwned creates dir (mode) owned by uid.
func mkOwned(t *testing.T, dir string, mode os.FileMode, uid int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

// writeOwned writes a file owned by uid.
func writeOwned(t *testing.T, path string, b []byte, uid int) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// msgName is a ready spool file name, ordered by n.
func msgName(n int) string { return fmt.Sprintf("%019d-1-%04x.msg", n, n) }

// TestAttackSpoolPlantedFiles: what another user plants where the flusher
// (root) reads is never published, never blocks the flush, and never
// leaks into an error or a log; the legitimate message beside it is
// published.
func TestAttackSpoolPlantedFiles(t *testing.T) {
	requireRoot(t)
	healthMsg := Message{Topic: "health-failure", Data: payload(event.TypeHealthFailure), Attributes: map[string]string{"type": event.TypeHealthFailure}}
	// secret is what root can read and the attacker wants: its first byte
	// is the one an undecodable-JSON error would quote.
	secretText := "\x07SECRET-" + randomHex(12)
	secret := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(secret, []byte(secretText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A sender that is not root: the SlurmUser of a controller, say.
	const slurmUID = 4242

	type setup func(t *testing.T, root string)
	cases := []struct {
		name  string
		plant setup
	}{
		{"message in a directory of a user that is no sender", func(t *testing.T, root string) {
			// Planted by nobody itself, in a spool left world-writable
			// by an older version.
			if err := os.Chmod(root, 0o777|os.ModeSticky); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(root, strconv.Itoa(nobodyUID))
			if out, err := asNobody(t, "/usr/bin/mkdir", "-m", "0700", dir); err != nil {
				t.Fatalf("nobody could not plant its directory: %v: %s", err, out)
			}
			f := filepath.Join(dir, msgName(1))
			if out, err := asNobody(t, "/bin/sh", "-c", `umask 077; printf '%s' "$1" > "$0"`, f, string(spoolFile(t, healthMsg))); err != nil {
				t.Fatalf("nobody could not plant its file: %v: %s", err, out)
			}
		}},
		{"directory named for a sender, owned by the attacker", func(t *testing.T, root string) {
			dir := filepath.Join(root, strconv.Itoa(slurmUID))
			mkOwned(t, dir, 0o700, nobodyUID)
			writeOwned(t, filepath.Join(dir, msgName(1)), spoolFile(t, Message{Topic: "job-pending", Data: payload(event.TypeJobPending)}), nobodyUID)
		}},
		{"sender's directory a symbolic link to the attacker's", func(t *testing.T, root string) {
			evil := filepath.Join(root, "evil")
			mkOwned(t, evil, 0o700, slurmUID)
			writeOwned(t, filepath.Join(evil, msgName(1)), spoolFile(t, Message{Topic: "job-pending", Data: payload(event.TypeJobPending)}), slurmUID)
			if err := os.Symlink(evil, filepath.Join(root, strconv.Itoa(slurmUID))); err != nil {
				t.Fatal(err)
			}
		}},
		{"sender's directory writable by others", func(t *testing.T, root string) {
			dir := filepath.Join(root, strconv.Itoa(slurmUID))
			mkOwned(t, dir, 0o777, slurmUID)
			writeOwned(t, filepath.Join(dir, msgName(1)), spoolFile(t, Message{Topic: "job-pending", Data: payload(event.TypeJobPending)}), nobodyUID)
		}},
		{"symbolic link to a secret in root's directory", func(t *testing.T, root string) {
			if err := os.Symlink(secret, filepath.Join(root, "0", msgName(1))); err != nil {
				t.Fatal(err)
			}
		}},
		{"symbolic link to /etc/shadow in root's directory", func(t *testing.T, root string) {
			if err := os.Symlink("/etc/shadow", filepath.Join(root, "0", msgName(1))); err != nil {
				t.Fatal(err)
			}
		}},
		{"hard link to a secret in root's directory", func(t *testing.T, root string) {
			if err := os.Link(secret, filepath.Join(root, "0", msgName(1))); err != nil {
				t.Skipf("no hard link across these directories: %v", err)
			}
		}},
		{"FIFO in root's directory", func(t *testing.T, root string) {
			if err := syscall.Mkfifo(filepath.Join(root, "0", msgName(1)), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"device in root's directory", func(t *testing.T, root string) {
			// /dev/zero's numbers (1, 5): reading it would never end.
			if err := syscall.Mknod(filepath.Join(root, "0", msgName(1)), syscall.S_IFCHR|0o600, 1<<8|5); err != nil {
				t.Skipf("mknod: %v", err)
			}
		}},
		{"oversized file in root's directory", func(t *testing.T, root string) {
			big := spoolFile(t, Message{Topic: "health-failure", Data: payload(event.TypeHealthFailure),
				Attributes: map[string]string{"pad": strings.Repeat("x", MaxSpoolFileBytes)}})
			writeOwned(t, filepath.Join(root, "0", msgName(1)), big, 0)
		}},
		{"file of another user in root's directory", func(t *testing.T, root string) {
			writeOwned(t, filepath.Join(root, "0", msgName(1)), spoolFile(t, healthMsg), nobodyUID)
		}},
		{"undecodable file in root's directory", func(t *testing.T, root string) {
			writeOwned(t, filepath.Join(root, "0", msgName(1)), []byte(secretText), 0)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := filepath.Join(publicDir(t), "spool")
			mkOwned(t, root, 0o755, 0)
			mkOwned(t, filepath.Join(root, "0"), 0o700, 0)
			c.plant(t, root)
			// The legitimate message, spooled by root's hook after the plant.
			good := Message{Topic: "health-failure", Data: payload(event.TypeHealthFailure), Attributes: map[string]string{"type": event.TypeHealthFailure, "good": "yes"}}
			writeOwned(t, filepath.Join(root, "0", msgName(2)), spoolFile(t, good), 0)

			log, logs := captured()
			pub := &fakePub{}
			o := &Outbox{Spool: &Spool{Dir: root, Log: log, Policy: SpoolPolicy{Senders: SpoolSenders{0: {RoleNode}, slurmUID: {RoleController}}}},
				Pub: pub, Timeout: 10 * time.Second}
			type flushed struct {
				res Result
				err error
			}
			done := make(chan flushed, 1)
			go func() { r, err := o.Flush(context.Background()); done <- flushed{r, err} }()
			var f flushed
			select {
			case f = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("the flush did not return: a planted file blocks it")
			}
			sent := pub.sent()
			if len(sent) != 1 || sent[0].Attributes["good"] != "yes" {
				t.Errorf("published %d messages %+v; want only the legitimate one", len(sent), sent)
			}
			text := fmt.Sprint(f.err) + logs.String()
			for _, leak := range []string{secretText[:1], "SECRET", `\u0007`, `\a`, "root:"} {
				if strings.Contains(text, leak) {
					t.Errorf("error or log quotes the planted target (%q):\n%s", leak, text)
				}
			}
			if logs.Len() == 0 {
				t.Errorf("nothing logged about the planted file")
			}
			if target, err := os.ReadFile(secret); err != nil || string(target) != secretText+"\n" {
				t.Errorf("the secret changed: %q, %v", target, err)
			}
		})
	}
}

// TestAttackSpoolForbiddenTopicOrType: a message its directory's user may
// not send (a spec to job-pending, a job report from a node, a health
// failure from the controller, a type attribute that lies about the
// payload) is set aside, never published.
func TestAttackSpoolForbiddenTopicOrType(t *testing.T) {
	uid := os.Geteuid()
	cases := []struct {
		name  string
		role  Role
		topic string
		typ   string
		attr  string
	}{
		{"cluster.applied to job-pending from a node", RoleNode, "job-pending", event.TypeClusterApply, ""},
		{"cluster.applied to cluster-spec from a node", RoleNode, "cluster-spec", event.TypeClusterApply, ""},
		{"job.pending from a node", RoleNode, "job-pending", event.TypeJobPending, ""},
		{"node.bootstrap_failed from a node's spool", RoleNode, "job-pending", event.TypeBootstrapFail, ""},
		{"health.failure to job-pending from a node", RoleNode, "job-pending", event.TypeHealthFailure, ""},
		{"cluster.applied to job-pending from the controller", RoleController, "job-pending", event.TypeClusterApply, ""},
		{"cluster.applied to cluster-spec from the controller", RoleController, "cluster-spec", event.TypeClusterApply, ""},
		{"slurm.command to slurm-commands from the controller", RoleController, "slurm-commands", event.TypeSlurmCommand, ""},
		{"health.failure from the controller", RoleController, "health-failure", event.TypeHealthFailure, ""},
		{"job.pending to the results topic", RoleController, "slurm-command-results", event.TypeJobPending, ""},
		{"type attribute differing from the payload", RoleController, "job-pending", event.TypeJobPending, event.TypeClusterApply},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log, logs := captured()
			s := &Spool{Dir: t.TempDir(), Log: log, Policy: SpoolPolicy{Senders: SpoolSenders{uid: {c.role}}}}
			m := Message{Topic: c.topic, Data: payload(c.typ)}
			if c.attr != "" {
				m.Attributes = map[string]string{"type": c.attr}
			}
			e, err := s.Put(m, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Release(e); err != nil {
				t.Fatal(err)
			}
			pub := &fakePub{}
			o := &Outbox{Spool: s, Pub: pub, Timeout: 10 * time.Second}
			_, ferr := o.Flush(context.Background())
			if n := len(pub.sent()); n != 0 {
				t.Errorf("published %d messages; want none", n)
			}
			if ferr == nil || !strings.Contains(ferr.Error(), "set aside") || !strings.Contains(logs.String(), "set aside") {
				t.Errorf("flush error %v, log %s; want the message reported set aside", ferr, logs)
			}
			ready, _ := readyName(e.Path)
			if _, err := os.Stat(ready + ".bad"); err != nil {
				t.Errorf("the message was not set aside as .bad: %v", err)
			}
			if s.Pending() != 0 {
				t.Errorf("the refused message is still pending")
			}
		})
	}
}

// TestRoleSendsMatchesWhatTheHooksSend: every message the real hooks send
// is what their role may send, and not what the other role may, so the
// allow-list neither drops a real report nor lets a node send a job event.
func TestRoleSendsMatchesWhatTheHooksSend(t *testing.T) {
	resume := filepath.Join(t.TempDir(), "resume.json")
	if err := os.WriteFile(resume, []byte(`{"jobs":[{"job_id":42,"nodes":"flexvm-a3u-1"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SLURM_RESUME_FILE": resume, "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "flexvm-a3u-1",
		"SLURM_JOB_PARTITION": "a3u"}
	ctl, ctlPub := testRuntime(t, env)
	ctx := context.Background()
	ctl.Run(ctx, slurm.HookResume, []string{"flexvm-a3u-1"})
	ctl.Run(ctx, slurm.HookSuspend, []string{"flexvm-a3u-1"})
	ctl.Run(ctx, slurm.HookResumeFail, []string{"flexvm-a3u-1"})
	ctl.Run(ctx, slurm.HookPrologCtld, nil)
	ctl.Run(ctx, slurm.HookEpilogCtld, nil)

	nodeEnv := map[string]string{"SLURMD_NODENAME": "flexvm-a3u-1", "SLURM_JOB_ID": "42"}
	node, nodePub := testRuntime(t, nodeEnv)
	fakeScontrol(t, node, "IDLE+DRAIN")
	node.Check = func(context.Context) (string, []string) { return VerdictFail, []string{"GPU 3: Xid 79"} }
	node.Run(ctx, slurm.HookProlog, nil)
	node.Run(ctx, slurm.HookEpilog, nil)
	node.Run(ctx, slurm.HookHealth, nil)
	node.Check = func(context.Context) (string, []string) { return VerdictInconclusive, nil }
	node.Run(ctx, slurm.HookHealth, nil)

	topics := SpoolTopics{Jobs: ctl.Config.Topics.Jobs, Health: ctl.Config.Topics.Health, Results: ctl.Config.Topics.Results}
	asCtl := SpoolPolicy{Senders: SpoolSenders{1: {RoleController}}, Topics: topics}
	asNode := SpoolPolicy{Senders: SpoolSenders{1: {RoleNode}}, Topics: topics}
	check := func(who string, msgs []Message, own, other SpoolPolicy, want int) {
		types := map[string]bool{}
		for _, m := range msgs {
			h, err := event.PeekHeader(m.Data)
			if err != nil {
				t.Fatalf("%s sent an undecodable payload: %v", who, err)
			}
			types[h.Type] = true
			if !own.Allows(1, m.Topic, h.Type) {
				t.Errorf("%s sends %s to %s, which its role may not send", who, h.Type, m.Topic)
			}
			if other.Allows(1, m.Topic, h.Type) {
				t.Errorf("%s's %s to %s is allowed to the other role too", who, h.Type, m.Topic)
			}
		}
		if len(types) != want {
			t.Errorf("%s sent types %v; want %d kinds (the test exercises every hook)", who, types, want)
		}
	}
	check("the controller hooks", ctlPub.sent(), asCtl, asNode, 5) // pending, suspend, resume_failed, started, finished
	check("the node hooks", nodePub.sent(), asNode, asCtl, 1)
	if !asCtl.Allows(1, topics.Results, event.TypeCommandResult) {
		t.Errorf("the agent's command results are not allowed from the controller")
	}
}

// TestAttackSpoolWorldWritableRoot: a spool root others can write: a
// sticky one (left by an older version) still has its foreign directories
// ignored, and no writer creates its directory there; one that is not
// sticky is not read at all.
func TestAttackSpoolWorldWritableRoot(t *testing.T) {
	t.Run("not sticky: nothing is read", func(t *testing.T) {
		root := t.TempDir()
		s := &Spool{Dir: root, Policy: testPolicy()}
		if _, err := s.Put(jobMsg("1"), time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(root, 0o777); err != nil {
			t.Fatal(err)
		}
		got, err := s.Claim(10)
		if len(got) != 0 || err == nil || !strings.Contains(err.Error(), "writable by other users") {
			t.Errorf("Claim = %d entries, %v; want none and the root refused", len(got), err)
		}
		if _, err := s.Put(jobMsg("2"), time.Now()); err == nil {
			t.Errorf("Put into a world-writable root succeeded; want it refused")
		}
	})
	t.Run("sticky: no directory is created there", func(t *testing.T) {
		root := t.TempDir()
		if err := os.Chmod(root, 0o777|os.ModeSticky); err != nil {
			t.Fatal(err)
		}
		s := &Spool{Dir: root, Policy: testPolicy()}
		_, err := s.Put(jobMsg("1"), time.Now())
		if err == nil || !strings.Contains(err.Error(), "not created there") {
			t.Errorf("Put = %v; want the directory not created in a world-writable root", err)
		}
		if _, err := os.Lstat(s.userDir()); err == nil {
			t.Errorf("%s was created", s.userDir())
		}
		// The Outbox then publishes directly: nothing is lost.
		pub := &fakePub{}
		if res, err := (&Outbox{Spool: s, Pub: pub, Timeout: time.Second}).Send(context.Background(), []Message{jobMsg("1")}); err != nil || res.Published != 1 {
			t.Errorf("Send = %+v, %v; want published directly", res, err)
		}
	})
}

// TestAttackSpoolWriterRefusesForeignDirectory: a hook never writes into a
// directory named for its user that another user made, or a link.
func TestAttackSpoolWriterRefusesForeignDirectory(t *testing.T) {
	requireRoot(t)
	t.Run("owned by the attacker", func(t *testing.T) {
		root := filepath.Join(publicDir(t), "spool")
		mkOwned(t, root, 0o755, 0)
		mkOwned(t, filepath.Join(root, "0"), 0o777, nobodyUID)
		s := &Spool{Dir: root, Policy: testPolicy()}
		if _, err := s.Put(jobMsg("1"), time.Now()); err == nil || !strings.Contains(err.Error(), "belongs to user 65534") {
			t.Errorf("Put = %v; want refused", err)
		}
	})
	t.Run("a symbolic link", func(t *testing.T) {
		root := filepath.Join(publicDir(t), "spool")
		mkOwned(t, root, 0o755, 0)
		elsewhere := t.TempDir()
		if err := os.Symlink(elsewhere, filepath.Join(root, "0")); err != nil {
			t.Fatal(err)
		}
		s := &Spool{Dir: root, Policy: testPolicy()}
		if _, err := s.Put(jobMsg("1"), time.Now()); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("Put = %v; want refused", err)
		}
		if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
			t.Errorf("written through the link: %v", entries)
		}
	})
}

// TestAttackHookLogPlantedLinkOrFIFO: where another user could write the
// hooks' log directory, what they plant as the hook's log file (a link to
// a file root owns, a FIFO) is neither written through nor blocks the
// hook: it logs to stderr alone.
func TestAttackHookLogPlantedLinkOrFIFO(t *testing.T) {
	who := "uid" + strconv.Itoa(os.Geteuid())
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	for name, plant := range map[string]func(path, target string) error{
		"link": func(path, target string) error { return os.Symlink(target, path) },
		"FIFO": func(path, _ string) error { return syscall.Mkfifo(path, 0o666) },
		// A hard link to a file of this user (with fs.protected_hardlinks
		// off, to any file).
		"hard link": func(path, target string) error { return os.Link(target, path) },
		// A file another user left in a log directory that was
		// world-writable: it would read (and rewrite) the hook's log.
		"another user's file": func(path, _ string) error {
			if os.Geteuid() != 0 {
				return errSkip
			}
			if err := os.WriteFile(path, nil, 0o666); err != nil {
				return err
			}
			return os.Chown(path, 65534, 65534)
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(t.TempDir(), "passwd")
			if err := os.WriteFile(target, []byte("root:x:0:0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			logPath := filepath.Join(dir, "hooks-"+who+".log")
			if err := plant(logPath, target); errors.Is(err, errSkip) {
				t.Skip("needs root to plant another user's file")
			} else if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			done := make(chan struct{})
			go func() {
				defer close(done)
				log, closeFn := hookLogger(Config{LogDir: dir}, &stderr)
				log.Info("hook ran")
				closeFn()
			}()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("the hook's logger blocked on the planted file")
			}
			if b, _ := os.ReadFile(target); string(b) != "root:x:0:0\n" {
				t.Errorf("written through the planted link: %q", b)
			}
			if !strings.Contains(stderr.String(), "hook ran") {
				t.Errorf("the hook's log did not reach stderr: %q", stderr.String())
			}
			if st, err := os.Lstat(logPath); err == nil && st.Mode().IsRegular() {
				if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "hook ran") {
					t.Errorf("the hook's log was written into the planted file")
				}
			}
		})
	}
}

// errSkip marks a variant this test cannot set up as the user it runs as.
var errSkip = errors.New("skip")
