package install

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// Change is what Apply or Remove did (or, dry, would do) to one path.
type Change struct {
	Path   string // absolute, without the root
	Action string // "created", "updated", "unchanged", "removed", "absent", or "kept: <why>"
}

func (c Change) String() string { return c.Action + " " + c.Path }

// Apply makes every item true under root, in order: a missing directory,
// file or link is created, one that differs (content, mode, owner, link
// target) is updated (a file is written to a temporary name and renamed
// into place), and anything else is left alone. A path that exists as
// another kind (a file where a link belongs, …) is an error, never
// replaced. With dryRun nothing is changed and the changes are those that
// would be made.
func Apply(root string, items []Item, dryRun bool) ([]Change, error) {
	var changes []Change
	for _, it := range items {
		action, err := apply(filepath.Join(root, it.Path), it, dryRun)
		if err != nil {
			return changes, fmt.Errorf("installing %s: %w", it.Path, err)
		}
		changes = append(changes, Change{Path: it.Path, Action: action})
	}
	return changes, nil
}

func apply(path string, it Item, dryRun bool) (string, error) {
	st, err := os.Lstat(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	aside := ""
	if it.Kind == Dir && it.Private && exists && !ownedBy(st, it.UID) {
		aside = filepath.Join(filepath.Dir(path), fmt.Sprintf(".foreign-%s-%d", filepath.Base(path), time.Now().UnixNano()))
		if !dryRun {
			if err := os.Rename(path, aside); err != nil {
				return "", fmt.Errorf("setting aside what another user made there: %w", err)
			}
		}
		exists = false
	}
	switch it.Kind {
	case Dir:
		if exists && !st.IsDir() {
			return "", fmt.Errorf("exists and is not a directory")
		}
		if aside != "" {
			if dryRun {
				return "created (another user's set aside)", nil
			}
			if err := os.Mkdir(path, 0o700); err != nil {
				return "", err
			}
			return "created (another user's set aside as " + filepath.Base(aside) + ")", setMeta(path, it)
		}
		if exists && (it.Shared || sameMeta(st, it)) {
			return "unchanged", nil
		}
		if dryRun {
			return createdOrUpdated(exists), nil
		}
		if !exists {
			if err := os.MkdirAll(path, 0o755); err != nil {
				return "", err
			}
		}
		if it.Shared {
			return "created", nil
		}
		return createdOrUpdated(exists), setMeta(path, it)
	case File:
		if exists && !st.Mode().IsRegular() {
			return "", fmt.Errorf("exists and is not a regular file")
		}
		if exists && sameMeta(st, it) {
			old, err := os.ReadFile(path)
			if err != nil {
				return "", err
			}
			if bytes.Equal(old, it.Content) {
				return "unchanged", nil
			}
		}
		if dryRun {
			return createdOrUpdated(exists), nil
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
		if err := os.WriteFile(tmp, it.Content, 0o600); err != nil {
			os.Remove(tmp)
			return "", err
		}
		if err := setMeta(tmp, it); err != nil {
			os.Remove(tmp)
			return "", err
		}
		if err := os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
			return "", err
		}
		return createdOrUpdated(exists), nil
	case Link:
		if exists && st.Mode()&fs.ModeSymlink == 0 {
			return "", fmt.Errorf("exists and is not a symbolic link; remove it first")
		}
		if exists {
			if target, err := os.Readlink(path); err == nil && target == it.Target {
				return "unchanged", nil
			}
		}
		if dryRun {
			return createdOrUpdated(exists), nil
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
		os.Remove(tmp)
		if err := os.Symlink(it.Target, tmp); err != nil {
			return "", err
		}
		if err := os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
			return "", err
		}
		return createdOrUpdated(exists), nil
	}
	return "", fmt.Errorf("unknown kind %d", it.Kind)
}

// ownedBy reports whether st is a real directory owned by uid.
func ownedBy(st fs.FileInfo, uid int) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return st.IsDir() && (!ok || int(sys.Uid) == uid)
}

func createdOrUpdated(exists bool) string {
	if exists {
		return "updated"
	}
	return "created"
}

// perm is the part of a mode Apply sets: permissions, sticky, setgid.
const perm = fs.ModePerm | fs.ModeSticky | fs.ModeSetgid

func sameMeta(st fs.FileInfo, it Item) bool {
	if st.Mode()&perm != it.Mode&perm {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return !ok || (int(sys.Uid) == it.UID && int(sys.Gid) == it.GID)
}

// setMeta sets path's owner, then its mode (chown clears the sticky and
// setgid bits on some systems).
func setMeta(path string, it Item) error {
	if st, err := os.Lstat(path); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != it.UID || int(sys.Gid) != it.GID {
			if err := os.Lchown(path, it.UID, it.GID); err != nil {
				return err
			}
		}
	}
	return os.Chmod(path, it.Mode&perm)
}

// Remove removes what items installed under root, in reverse order: links
// (only symbolic links), files, and directories that are empty once empty
// spool subdirectories are gone. A directory still holding something —
// unpublished messages in the spool, the agent's ledger, logs — is kept
// and reported with why; shared directories are never removed. With
// dryRun nothing is changed.
func Remove(root string, items []Item, dryRun bool) ([]Change, error) {
	var changes []Change
	gone := map[string]bool{} // removed, or would be in a dry run
	for _, it := range slices.Backward(items) {
		path := filepath.Join(root, it.Path)
		action, err := remove(path, it, dryRun, gone)
		if err != nil {
			return changes, fmt.Errorf("removing %s: %w", it.Path, err)
		}
		if action == "removed" {
			gone[path] = true
		}
		changes = append(changes, Change{Path: it.Path, Action: action})
	}
	return changes, nil
}

func remove(path string, it Item, dryRun bool, gone map[string]bool) (string, error) {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "absent", nil
	}
	if err != nil {
		return "", err
	}
	switch it.Kind {
	case Link:
		if st.Mode()&fs.ModeSymlink == 0 {
			return "kept: not a symbolic link", nil
		}
	case File:
		if !st.Mode().IsRegular() {
			return "kept: not a regular file", nil
		}
	case Dir:
		if it.Shared {
			return "kept: shared", nil
		}
		if !st.IsDir() {
			return "kept: not a directory", nil
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return "", err
		}
		n := 0
		for _, e := range entries {
			if !gone[filepath.Join(path, e.Name())] {
				n++
			}
		}
		if n > 0 {
			return fmt.Sprintf("kept: not empty (%d entries)", n), nil
		}
	}
	if dryRun {
		return "removed", nil
	}
	if err := os.Remove(path); err != nil {
		return "", err
	}
	return "removed", nil
}
