package hooks

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/proc"
	"github.com/flexslurm/flexslurm/shared/text"
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
// partial file), under Dir/<uid>/: each user that may publish from the host
// has a directory of its own, 0700, created by the bootstrap (root, on a
// node) or `flexslurm install controller` (the SlurmUser and root, on the
// controller). The spool root is not writable by other users (0755).
//
// File names order messages by spooling time:
//
//	<unix nanoseconds, 19 digits>-<pid>-<random>.msg          ready
//	<…>.msg.claimed-<pid>                                     being published by <pid>
//	<…>.msg.bad                                               set aside, never published
//	.tmp-<…>                                                  being written
//
// A process claims a ready file by renaming it, so two flushers never
// publish the same file; a claim whose process is gone (checked in
// /proc/PID/status) or older than StaleClaim is released again. Delivery is
// therefore at least once: a message can be published twice when a process
// dies between publishing and removing its file, which consumers tolerate.
//
// What is published is what Policy allows, from the directories it names
// only: root publishes the directories of every sender, any other user its
// own. A directory is read only when it is a real directory (not a
// symbolic link) owned by the uid its name says and not writable by group
// or others; a file only when it is a regular file of that owner with one
// link and at most MaxSpoolFileBytes, opened without following a link and
// without blocking. Anything else, and a message whose topic and event
// type its directory may not carry, is set aside (renamed .bad) with a log
// line that never quotes the file's content.
type Spool struct {
	// Dir is the spool root.
	Dir string
	// Policy names the directories that are published and what each may
	// carry; with no sender, Claim publishes nothing.
	Policy SpoolPolicy
	// Log receives what is ignored or set aside; nil discards.
	Log *slog.Logger
}

// StaleClaim is the age after which any claim is released.
const StaleClaim = 10 * time.Minute

// MaxSpoolFileBytes bounds a spool file. A spooled message is a payload of
// at most event.MaxPayloadBytes (1 MiB; the functions refuse more), which
// JSON carries in base64 (4/3 of it), plus a topic id and a few short
// attributes: 2 MiB holds the largest with room to spare, and a larger
// file cannot be one.
const MaxSpoolFileBytes = 2 << 20

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

func (s *Spool) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

// othersWrite reports whether group or others may write a directory of
// mode m.
func othersWrite(m fs.FileMode) bool { return m.Perm()&0o022 != 0 }

// checkRoot checks the spool root before anything is written to or read
// from it: a real directory that others cannot write, or (left by an older
// version, tightened by the bootstrap and the install) sticky like /tmp,
// where others cannot rename or remove what is not theirs. It returns
// fs.ErrNotExist (wrapped) when the root does not exist.
func (s *Spool) checkRoot() (sticky bool, err error) {
	st, err := os.Lstat(s.Dir)
	if err != nil {
		return false, fmt.Errorf("spool %s: %w", s.Dir, err)
	}
	if !st.IsDir() {
		return false, fmt.Errorf("spool %s is not a directory (%v)", s.Dir, st.Mode().Type())
	}
	if othersWrite(st.Mode()) {
		if st.Mode()&fs.ModeSticky == 0 {
			return false, fmt.Errorf("spool %s is writable by other users (mode %v): refused; the bootstrap or `flexslurm install controller` sets it to 0755", s.Dir, st.Mode().Perm())
		}
		return true, nil
	}
	return false, nil
}

// ensure makes sure this user's directory exists and is safe to write:
// the spool root is created (0755) when missing; the user's directory is
// created (0700) only in a root that other users cannot write, and one
// that exists must be a real directory of this user, its mode tightened to
// 0700 when group or others could write it. Otherwise this process does
// not spool (its messages are published directly).
func (s *Spool) ensure() error {
	uid := os.Geteuid()
	dir := s.userDir()
	sticky, err := s.checkRoot()
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(s.Dir), 0o755); err != nil {
			return fmt.Errorf("creating spool %s: %w", s.Dir, err)
		}
		if err := os.Mkdir(s.Dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("creating spool %s: %w", s.Dir, err)
		}
		sticky, err = s.checkRoot()
	}
	if err != nil {
		return err
	}
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if sticky {
			return fmt.Errorf("spool %s has no directory for user %d, and it is writable by every user (left by an older version): not created there; the bootstrap or `flexslurm install controller` creates it", s.Dir, uid)
		}
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("creating spool %s: %w", dir, err)
		}
		st, err = os.Lstat(dir)
	}
	if err != nil {
		return fmt.Errorf("spool %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("spool %s is not a directory (%v): refused", dir, st.Mode().Type())
	}
	if owner, ok := fileOwner(st); !ok || owner != uid {
		return fmt.Errorf("spool %s belongs to user %d, not to this user (%d): refused", dir, owner, uid)
	}
	if othersWrite(st.Mode()) {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("spool %s: tightening mode %v to 0700: %w", dir, st.Mode().Perm(), err)
		}
	}
	return nil
}

func fileOwner(st fs.FileInfo) (int, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, false
	}
	return int(sys.Uid), true
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
	if err := writeNew(tmp, b); err != nil {
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

// writeNew creates path (never through a link, never an existing file),
// mode 0600, with b.
func writeNew(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// spoolDir is one per-user directory opened for flushing: every file
// operation goes through its descriptor, so that the directory checked is
// the directory read.
type spoolDir struct {
	f    *os.File
	fd   int
	uid  int
	path string
}

// openDirs opens the directories this process publishes: every sender's
// when it runs as root, else its own (when it is a sender). Directories
// that are not senders' are ignored; those that fail their checks are
// reported and skipped.
func (s *Spool) openDirs() ([]*spoolDir, []error) {
	sticky, err := s.checkRoot()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{err}
	}
	if sticky {
		s.log().Warn("spool root is writable by every user (left by an older version): the bootstrap or `flexslurm install controller` tightens it to 0755", "spool", s.Dir)
	}
	euid := os.Geteuid()
	var uids []int
	if euid != 0 {
		if !s.Policy.Sender(euid) {
			s.log().Warn("this user's spool directory is not published: it is no sender (spool_senders)", "spool", s.Dir, "uid", euid)
			return nil, nil
		}
		uids = []int{euid}
	} else {
		entries, err := os.ReadDir(s.Dir)
		if err != nil {
			return nil, []error{fmt.Errorf("reading spool %s: %w", s.Dir, err)}
		}
		for _, e := range entries {
			uid, err := strconv.Atoi(e.Name())
			if err != nil || strconv.Itoa(uid) != e.Name() {
				continue
			}
			if !s.Policy.Sender(uid) {
				s.log().Warn("spool directory ignored: its user is no sender (spool_senders)", "dir", filepath.Join(s.Dir, e.Name()))
				continue
			}
			uids = append(uids, uid)
		}
	}
	var out []*spoolDir
	var errs []error
	for _, uid := range uids {
		d, err := openSpoolDir(filepath.Join(s.Dir, strconv.Itoa(uid)), uid)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			s.log().Warn("spool directory ignored", "error", err)
			errs = append(errs, err)
			continue
		}
		out = append(out, d)
	}
	return out, errs
}

// openSpoolDir opens path, which must be a real directory owned by uid
// that group and others cannot write.
func openSpoolDir(path string, uid int) (*spoolDir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("spool %s: %w", path, fs.ErrNotExist)
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("spool %s is not a directory (a symbolic link or a file): not read", path)
		}
		return nil, fmt.Errorf("opening spool %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("spool %s: %w", path, err)
	}
	switch {
	case int(st.Uid) != uid:
		unix.Close(fd)
		return nil, fmt.Errorf("spool %s belongs to user %d, not to user %d as its name says: not read", path, st.Uid, uid)
	case st.Mode&0o022 != 0:
		unix.Close(fd)
		return nil, fmt.Errorf("spool %s is writable by group or others (mode %#o): not read", path, st.Mode&0o7777)
	}
	return &spoolDir{f: os.NewFile(uintptr(fd), path), fd: fd, uid: uid, path: path}, nil
}

func closeDirs(dirs []*spoolDir) {
	for _, d := range dirs {
		d.f.Close()
	}
}

// Claim claims up to limit spooled messages, oldest first, after releasing
// stale claims and removing temporary files older than StaleClaim (judged
// by the wall clock against file modification times). A file that is not
// a message its directory may carry is set aside as <name>.bad, logged and
// reported in the returned error (which never quotes the file); the
// claimed entries are returned all the same.
func (s *Spool) Claim(limit int) ([]Entry, error) {
	now := time.Now()
	dirs, errs := s.openDirs()
	defer closeDirs(dirs)
	type candidate struct {
		d    *spoolDir
		name string
	}
	var ready []candidate
	for _, d := range dirs {
		entries, err := d.f.ReadDir(-1)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading spool %s: %w", d.path, err))
			continue
		}
		for _, e := range entries {
			name := e.Name()
			switch {
			case strings.HasSuffix(name, ".msg"):
				ready = append(ready, candidate{d, name})
			case strings.Contains(name, ".msg.claimed-"):
				if staleClaim(d, name, now) {
					if r, ok := readyName(name); ok && unix.Renameat(d.fd, name, d.fd, r) == nil {
						ready = append(ready, candidate{d, r})
					}
				}
			case strings.HasPrefix(name, ".tmp-"):
				var st unix.Stat_t
				if unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && now.Sub(time.Unix(st.Mtim.Unix())) > StaleClaim {
					unix.Unlinkat(d.fd, name, 0)
				}
			}
		}
	}
	slices.SortFunc(ready, func(a, b candidate) int { return strings.Compare(a.name, b.name) })
	var out []Entry
	for _, c := range ready {
		if len(out) >= limit {
			break
		}
		claimed := c.name + claimSuffix()
		if err := unix.Renameat(c.d.fd, c.name, c.d.fd, claimed); err != nil {
			continue // another process claimed it first
		}
		sp, err := s.read(c.d, claimed)
		if err != nil {
			err = fmt.Errorf("spool file %s set aside as .bad: %w", filepath.Join(c.d.path, c.name), err)
			s.setAside(c.d, claimed, c.name+".bad", err)
			errs = append(errs, err)
			continue
		}
		out = append(out, Entry{Path: filepath.Join(c.d.path, claimed), Msg: sp.Message, SpooledAt: sp.SpooledAt})
	}
	return out, errors.Join(errs...)
}

// setAside renames a refused file so that it is never read again, or,
// when it cannot be moved, leaves it (it is refused again at every flush).
func (s *Spool) setAside(d *spoolDir, from, to string, why error) {
	if err := unix.Renameat(d.fd, from, d.fd, to); err != nil {
		s.log().Error("spool file refused and left in place: it cannot be moved aside", "dir", d.path, "file", from, "reason", why, "error", err)
		return
	}
	s.log().Warn("spool file refused and set aside", "dir", d.path, "file", to, "reason", why)
}

// read reads and checks one claimed file of d. Its errors say what is
// wrong without quoting the file.
func (s *Spool) read(d *spoolDir, name string) (spooled, error) {
	var sp spooled
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return sp, fmt.Errorf("stat: %w", err)
	}
	if err := checkFile(&st, d.uid); err != nil {
		return sp, err
	}
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return sp, fmt.Errorf("opening: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	// The file opened may not be the one examined above: check again.
	if err := unix.Fstat(fd, &st); err != nil {
		return sp, fmt.Errorf("stat: %w", err)
	}
	if err := checkFile(&st, d.uid); err != nil {
		return sp, err
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSpoolFileBytes+1))
	if err != nil {
		return sp, fmt.Errorf("reading: %w", err)
	}
	if len(b) > MaxSpoolFileBytes {
		return sp, fmt.Errorf("larger than %d bytes", MaxSpoolFileBytes)
	}
	if err := json.Unmarshal(b, &sp); err != nil {
		return sp, fmt.Errorf("not a spooled message (%s)", jsonProblem(err))
	}
	if sp.Topic == "" {
		return sp, errors.New("not a spooled message (no topic)")
	}
	h, err := event.PeekHeader(sp.Data)
	if err != nil {
		return sp, errors.New("its payload is not a flexslurm event (no valid header)")
	}
	if t, ok := sp.Attributes["type"]; ok && t != h.Type {
		return sp, fmt.Errorf("its type attribute %q differs from its payload's type %q", text.Truncate(t, 64), text.Truncate(h.Type, 64))
	}
	if !s.Policy.Allows(d.uid, sp.Topic, h.Type) {
		return sp, fmt.Errorf("%q to topic %q is not what user %d may send (%v)", text.Truncate(h.Type, 64), text.Truncate(sp.Topic, 256), d.uid, s.Policy.Senders[d.uid])
	}
	return sp, nil
}

// checkFile accepts a regular file of owner uid with one link, at most
// MaxSpoolFileBytes.
func checkFile(st *unix.Stat_t, uid int) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return errors.New("a symbolic link, not a regular file")
	case unix.S_IFIFO:
		return errors.New("a FIFO, not a regular file")
	case unix.S_IFCHR, unix.S_IFBLK:
		return errors.New("a device, not a regular file")
	case unix.S_IFSOCK:
		return errors.New("a socket, not a regular file")
	default:
		return fmt.Errorf("not a regular file (mode %#o)", st.Mode)
	}
	if int(st.Uid) != uid {
		return fmt.Errorf("owned by user %d, not by the directory's user %d", st.Uid, uid)
	}
	if uint64(st.Nlink) != 1 {
		return fmt.Errorf("has %d links (a spooled message has one)", st.Nlink)
	}
	if st.Size > MaxSpoolFileBytes {
		return fmt.Errorf("%d bytes, larger than %d", st.Size, MaxSpoolFileBytes)
	}
	return nil
}

// jsonProblem describes a JSON error by its kind and position only: the
// decoder's own message may quote the input.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("a JSON value of the wrong type at byte %d", typ.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated JSON"
	default:
		return "undecodable JSON"
	}
}

// staleClaim reports whether a claimed file's process is gone or the claim
// is older than StaleClaim.
func staleClaim(d *spoolDir, name string, now time.Time) bool {
	i := strings.LastIndex(name, ".claimed-")
	pid, err := strconv.Atoi(name[i+len(".claimed-"):])
	if err != nil || !pidAlive(pid) {
		return true
	}
	var st unix.Stat_t
	return unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && now.Sub(time.Unix(st.Mtim.Unix())) > StaleClaim
}

// Pending counts the spooled messages, claimed or not, in the directories
// this process publishes.
func (s *Spool) Pending() int {
	dirs, _ := s.openDirs()
	defer closeDirs(dirs)
	n := 0
	for _, d := range dirs {
		entries, _ := d.f.ReadDir(-1)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".msg") || strings.Contains(e.Name(), ".msg.claimed-") {
				n++
			}
		}
	}
	return n
}

func pidAlive(pid int) bool { return proc.Alive(pid) }
