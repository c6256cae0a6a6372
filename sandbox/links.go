package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"syscall"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// A tool may make symbolic links in a directory granted read-write, as
// long as each leads somewhere inside the grant (RATIONALE.md, "Links a
// tool makes stay inside its grant"). os.Root already keeps the tool from
// following any link out; these checks keep it from leaving one behind
// for the host to follow. Every change that could make a link lead out is
// checked: making one (Symlink), and moving one, alone (Rename, Link) or
// with the directory that holds it (Rename).

// maxLinkWalk bounds the entries a directory's rename looks through for
// links; a bigger tree cannot be renamed.
const maxLinkWalk = 100_000

// linkLeadsOut says why a link in dir (a name in the root) whose target
// is target would lead outside the grant, or "" if it would not. It
// resolves the target as the host will, through the links that exist now,
// with os.Root; and a target may climb ("..") only at its start, so that
// what a link leads to cannot change when a name it passes through is
// later made a link.
func (r *rootFS) linkLeadsOut(dir, target string) string {
	switch {
	case path.IsAbs(target):
		return "an absolute target leads outside the granted dir " + r.guest
	case climbsAfterName(target):
		return `".." after a name: a link may climb only at its start, so that where it leads cannot change when a name on its way becomes a link`
	}
	_, err := r.root.Stat(dir + "/" + target)
	switch {
	case err == nil, errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		// Inside, or dangling inside: what it will lead to once made can
		// only be below where it stops now.
		return ""
	case leavesRoot(err):
		return "leads outside the granted dir " + r.guest
	}
	return fmt.Sprintf("cannot be resolved inside the granted dir %s: %v", r.guest, err)
}

// climbsAfterName reports whether target has a ".." after a name.
func climbsAfterName(target string) bool {
	named := false
	for _, part := range strings.Split(target, "/") {
		switch part {
		case "", ".":
		case "..":
			if named {
				return true
			}
		default:
			named = true
		}
	}
	return false
}

// leadingClimbs counts the ".." that target starts with.
func leadingClimbs(target string) int {
	n := 0
	for _, part := range strings.Split(target, "/") {
		switch part {
		case "", ".":
		case "..":
			n++
		default:
			return n
		}
	}
	return n
}

// withoutClimbs is target without its first n "..".
func withoutClimbs(target string, n int) string {
	parts := strings.Split(target, "/")
	for i, part := range parts {
		if n == 0 {
			return strings.Join(parts[i:], "/")
		}
		if part == ".." {
			n--
		}
	}
	return "."
}

// moveLeadsOut says why moving the entry from to the name to (names in
// the root) would leave a link that leads outside the grant, or "".
func (r *rootFS) moveLeadsOut(from, to string) (string, error) {
	fi, err := r.root.Lstat(from)
	if err != nil {
		return "", err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := r.root.Readlink(from)
		if err != nil {
			return "", err
		}
		if why := r.linkLeadsOut(path.Dir(to), target); why != "" {
			return fmt.Sprintf("the link -> %q: %s", target, why), nil
		}
	case fi.IsDir():
		return r.treeMoveLeadsOut(from, to)
	}
	return "", nil
}

// treeMoveLeadsOut says why moving the directory from to to would leave
// a link under it that leads outside the grant, or "". A link whose
// target climbs no higher than the moved directory goes with what it
// leads to; one that climbs out of it is checked from its new place.
func (r *rootFS) treeMoveLeadsOut(from, to string) (string, error) {
	seen := 0
	var walk func(rel string, depth int) (string, error)
	walk = func(rel string, depth int) (string, error) {
		entries, err := r.readDir(path.Join(from, rel))
		if err != nil {
			return "", err
		}
		for _, e := range entries {
			if seen++; seen > maxLinkWalk {
				return fmt.Sprintf("holds more than %d entries to look through for links", maxLinkWalk), nil
			}
			name := path.Join(rel, e.Name())
			var why string
			switch {
			case e.Type()&fs.ModeSymlink != 0:
				why, err = r.movedLinkLeadsOut(path.Join(from, name), path.Dir(to), depth)
			case e.IsDir():
				why, err = walk(name, depth+1)
			}
			if why != "" || err != nil {
				return why, err
			}
		}
		return "", nil
	}
	return walk("", 0)
}

// movedLinkLeadsOut says why the link at name, depth directories below a
// directory moved into newParent, would lead outside the grant from its
// new place, or "".
func (r *rootFS) movedLinkLeadsOut(name, newParent string, depth int) (string, error) {
	target, err := r.root.Readlink(name)
	if err != nil {
		return "", err
	}
	why := ""
	switch {
	case path.IsAbs(target), climbsAfterName(target):
		why = r.linkLeadsOut(".", target)
	case leadingClimbs(target) > depth:
		// It climbs out of the moved directory: seen from the new parent,
		// it climbs depth+1 less.
		why = r.linkLeadsOut(newParent, withoutClimbs(target, depth+1))
	}
	if why != "" {
		return fmt.Sprintf("the link %q -> %q: %s", path.Join(r.guest, name), target, why), nil
	}
	return "", nil
}

func (r *rootFS) readDir(name string) ([]fs.DirEntry, error) {
	d, err := r.root.Open(name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(-1)
}

// refuseLink records a change that would leave a link leading out of the
// grant, and refuses it.
func (r *rootFS) refuseLink(format string, args ...any) experimentalsys.Errno {
	r.denied.add(format, args...)
	return experimentalsys.EPERM
}
