// Package privatedir checks that a data dir holding secrets (token
// hashes, tokens, results, the audit log) is its owner's alone: the
// server's and the agent's make theirs mode 0700 and every file in it
// 0600, and warn, naming the fix, about a dir or files made wider before
// (by an older version, a restore, or a hand). They only warn: an
// operator may share a dir with a backup group on purpose.
package privatedir

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// Dir and File are the modes the data dir and its files are made with.
const (
	Dir  os.FileMode = 0o700
	File os.FileMode = 0o600
)

// shownFiles bounds the files a warning names.
const shownFiles = 5

// Warn logs a warning if dir, or anything in it, may be read or written
// by others than its owner, naming the files and the command that fixes
// them. Symbolic links are not followed.
func Warn(dir string, log *slog.Logger) {
	info, err := os.Lstat(dir)
	if err != nil {
		log.Warn("data dir not checked for its mode", "dir", dir, "err", err)
		return
	}
	if info.Mode().Perm()&0o077 != 0 {
		log.Warn("the data dir is open to other users, and holds secrets: make it the owner's alone",
			"dir", dir, "mode", modeString(info.Mode()), "fix", "chmod 700 "+dir)
	}
	var wide []string
	n := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone while walked: a temporary file
			}
			return err
		}
		if path == dir || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.Mode().Perm()&0o077 != 0 {
			n++
			if len(wide) < shownFiles {
				wide = append(wide, path+" "+modeString(fi.Mode()))
			}
		}
		return nil
	})
	if err != nil {
		log.Warn("data dir not checked for its files' modes", "dir", dir, "err", err)
	}
	if n > 0 {
		log.Warn("files in the data dir are open to other users, and hold secrets: make them the owner's alone",
			"dir", dir, "count", n, "files", wide, "fix", "chmod -R go-rwx "+dir)
	}
}

// modeString is m's permissions in octal, as chmod takes them.
func modeString(m os.FileMode) string { return fmt.Sprintf("%#o", m.Perm()) }
