package hooks

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/proc"
)

// Message is one Pub/Sub message to publish.
type Message struct {
	Topic      string            `json:"topic"`
	Data       []byte            `json:"data"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

// spooled is the content of a spool file.
type spooled struct {
	Message
	SpooledAt time.Time `json:"spooled_at"`
}

// Spool keeps messages on local disk until they are published, so that a
// hook that cannot reach Pub/Sub loses nothing. Each message is one file,
// written to a temporary name and renamed into place (readers never see a
// partial file), under Dir/<uid>/ so that hooks running as the SlurmUser and
// as root never need to touch each other's files; root handles every
// subdirectory.
//
// File names order messages by spooling time:
//
//	<unix nanoseconds, 19 digits>-<pid>-<random>.msg          ready
//	<…>.msg.claimed-<pid>                                     being published by <pid>
//	.tmp-<…>                                                  being written
//
// A process claims a ready file by renaming it, so two flushers never
// publish the same file; a claim whose process is gone (checked in
// /proc/PID/status) or older than StaleClaim is released again. Delivery is
// therefore at least once: a message can be published twice when a process
// dies between publishing and removing its file, which consumers tolerate.
type Spool struct {
	// Dir is the spool root.
	Dir string
}

// StaleClaim is the age after which any claim is released.
const StaleClaim = 10 * time.Minute

// Entry is one spooled message held (claimed) by this process.
type Entry struct {
	// Path is the claimed file.
	Path string
	// Msg is its message.
	Msg Message
	// SpooledAt is when it was first spooled.
	SpooledAt time.Time
}

func (s *Spool) userDir() string { return filepath.Join(s.Dir, strconv.Itoa(os.Geteuid())) }

// ensure creates the spool root (mode 1777 when this process creates it)
// and this user's subdirectory (0700).
func (s *Spool) ensure() error {
	if _, err := os.Stat(s.Dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(s.Dir, 0o755); err != nil {
			return fmt.Errorf("creating spool %s: %w", s.Dir, err)
		}
		if err := os.Chmod(s.Dir, 0o777|os.ModeSticky); err != nil {
			return fmt.Errorf("creating spool %s: %w", s.Dir, err)
		}
	}
	if err := os.Mkdir(s.userDir(), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating spool %s: %w", s.userDir(), err)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func claimSuffix() string { return ".claimed-" + strconv.Itoa(os.Getpid()) }

// Put spools m and returns it claimed by this process: publish it, then call
// Done (published) or Release (not published: it stays for a later flush).
func (s *Spool) Put(m Message, now time.Time) (Entry, error) {
	if err := s.ensure(); err != nil {
		return Entry{}, err
	}
	b, err := json.Marshal(spooled{Message: m, SpooledAt: now.UTC()})
	if err != nil {
		return Entry{}, fmt.Errorf("spooling a message for %s: %w", m.Topic, err)
	}
	dir := s.userDir()
	name := fmt.Sprintf("%019d-%d-%s.msg", now.UnixNano(), os.Getpid(), randomHex(4))
	tmp := filepath.Join(dir, ".tmp-"+name)
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		os.Remove(tmp)
		return Entry{}, fmt.Errorf("spooling a message for %s: %w", m.Topic, err)
	}
	path := filepath.Join(dir, name+claimSuffix())
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return Entry{}, fmt.Errorf("spooling a message for %s: %w", m.Topic, err)
	}
	return Entry{Path: path, Msg: m, SpooledAt: now}, nil
}

// Done removes a published entry.
func (s *Spool) Done(e Entry) error {
	if err := os.Remove(e.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing published spool file %s: %w", e.Path, err)
	}
	return nil
}

// Release hands an unpublished entry back to the spool for a later flush.
func (s *Spool) Release(e Entry) error {
	ready, ok := readyName(e.Path)
	if !ok {
		return fmt.Errorf("releasing spool file %s: not a claimed file", e.Path)
	}
	if err := os.Rename(e.Path, ready); err != nil {
		return fmt.Errorf("releasing spool file %s: %w", e.Path, err)
	}
	return nil
}

// readyName strips the claim suffix of a claimed file path.
func readyName(path string) (string, bool) {
	i := strings.LastIndex(path, ".claimed-")
	if i < 0 || !strings.HasSuffix(path[:i], ".msg") {
		return "", false
	}
	return path[:i], true
}

// dirs returns the subdirectories this process may flush: every user's
// when running as root, else its own.
func (s *Spool) dirs() []string {
	if os.Geteuid() != 0 {
		return []string{s.userDir()}
	}
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() {
			out = append(out, filepath.Join(s.Dir, e.Name()))
		}
	}
	return out
}

// Claim claims up to limit spooled messages, oldest first, after releasing
// stale claims and removing temporary files older than StaleClaim (judged
// by the wall clock against file modification times). A file
// that cannot be decoded is moved aside as <name>.bad and reported in the
// returned error; the claimed entries are returned all the same.
func (s *Spool) Claim(limit int) ([]Entry, error) {
	now := time.Now()
	var errs []error
	var ready []string
	for _, dir := range s.dirs() {
		entries, err := os.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("reading spool %s: %w", dir, err))
			}
			continue
		}
		for _, e := range entries {
			name := e.Name()
			path := filepath.Join(dir, name)
			switch {
			case strings.HasSuffix(name, ".msg"):
				ready = append(ready, path)
			case strings.Contains(name, ".msg.claimed-"):
				if staleClaim(path, name, now) {
					if r, ok := readyName(path); ok && os.Rename(path, r) == nil {
						ready = append(ready, r)
					}
				}
			case strings.HasPrefix(name, ".tmp-"):
				if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > StaleClaim {
					os.Remove(path)
				}
			}
		}
	}
	slices.SortFunc(ready, func(a, b string) int { return strings.Compare(filepath.Base(a), filepath.Base(b)) })
	var out []Entry
	for _, path := range ready {
		if len(out) >= limit {
			break
		}
		claimed := path + claimSuffix()
		if err := os.Rename(path, claimed); err != nil {
			continue // another process claimed it first
		}
		b, err := os.ReadFile(claimed)
		var sp spooled
		if err == nil {
			err = json.Unmarshal(b, &sp)
		}
		if err == nil && sp.Topic == "" {
			err = errors.New("no topic")
		}
		if err != nil {
			os.Rename(claimed, path+".bad")
			errs = append(errs, fmt.Errorf("spool file %s is unreadable, moved aside as .bad: %w", path, err))
			continue
		}
		out = append(out, Entry{Path: claimed, Msg: sp.Message, SpooledAt: sp.SpooledAt})
	}
	return out, errors.Join(errs...)
}

// staleClaim reports whether a claimed file's process is gone or the claim
// is older than StaleClaim.
func staleClaim(path, name string, now time.Time) bool {
	i := strings.LastIndex(name, ".claimed-")
	pid, err := strconv.Atoi(name[i+len(".claimed-"):])
	if err != nil || !pidAlive(pid) {
		return true
	}
	info, err := os.Stat(path)
	return err == nil && now.Sub(info.ModTime()) > StaleClaim
}

// Pending counts the spooled messages, claimed or not, this process can
// see.
func (s *Spool) Pending() int {
	n := 0
	for _, dir := range s.dirs() {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".msg") || strings.Contains(e.Name(), ".msg.claimed-") {
				n++
			}
		}
	}
	return n
}

func pidAlive(pid int) bool { return proc.Alive(pid) }
