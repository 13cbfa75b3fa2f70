package node

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// chrooted reports whether munged and slurmd run in a chroot
// (Options.SlurmRoot).
func (o Options) chrooted() bool { return o.SlurmRoot != "" && filepath.Clean(o.SlurmRoot) != "/" }

// inSlurmRoot returns how to run program with args in the Slurm
// installation's root: as is on the machine's, through `chroot DIR` in a
// chroot (chroot(8) execs the program, so the PID Host.Start returns is
// the program's).
func (b *booter) inSlurmRoot(program string, args ...string) (string, []string) {
	if !b.o.chrooted() {
		return program, args
	}
	return ChrootPath, append([]string{b.o.SlurmRoot, program}, args...)
}

// mungeUser returns the uid and gid of the munge user that owns the key:
// the machine's, or the chroot's (its /etc/passwd; the two may differ).
func (b *booter) mungeUser() (int, int, error) {
	if !b.o.chrooted() {
		return b.o.Host.LookupUser("munge")
	}
	return lookupPasswd(filepath.Join(b.o.SlurmRoot, "etc/passwd"), "munge")
}

// ErrNoSuchUser: the passwd(5) file names no such user.
var ErrNoSuchUser = errors.New("no such user")

// lookupPasswd returns the uid and gid of user name in the passwd(5) file
// at path.
func lookupPasswd(path, name string) (int, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("looking up user %s: %w", name, err)
	}
	defer f.Close()
	return ParsePasswd(f, name, path)
}

// ParsePasswd returns the uid and gid of user name in a passwd(5) file
// read from r (path names it in errors); ErrNoSuchUser when it has none.
func ParsePasswd(r io.Reader, name, path string) (int, int, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 4 || fields[0] != name {
			continue
		}
		uid, err1 := strconv.Atoi(fields[2])
		gid, err2 := strconv.Atoi(fields[3])
		if err1 != nil || err2 != nil {
			return 0, 0, fmt.Errorf("user %s in %s: uid %q, gid %q are not numbers", name, path, fields[2], fields[3])
		}
		return uid, gid, nil
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("reading %s: %w", path, err)
	}
	return 0, 0, fmt.Errorf("%w: %s in %s", ErrNoSuchUser, name, path)
}
