package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tetratelabs/wazero"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	wazerosys "github.com/tetratelabs/wazero/sys"
)

// rootFS is a granted directory as wazero sees it, confined with os.Root:
// no path, ".." or symbolic link can lead outside it, and without a race
// between checking a path and using it. wazero's own DirFS joins paths and
// lets the host follow symbolic links anywhere. A link the tool makes or
// moves must lead inside it too (links.go), so that none is left for the
// host to follow out.
//
// A refusal is an EPERM to the guest and a line in the call's denials. A
// read-only grant refuses every change with EROFS (wazero's ReadFS says
// ENOSYS, which tools report as "not implemented").
type rootFS struct {
	experimentalsys.UnimplementedFS
	root     *os.Root
	guest    string
	readOnly bool
	denied   *denials
	// links serializes the changes that could leave a link leading out
	// (links.go) across the calls of a sandbox, which may share a
	// directory: each is checked, then made, with no other in between.
	links *sync.Mutex
}

// writes is what a read-only grant returns for an attempt to change it.
func (r *rootFS) writes() experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	return 0
}

// name turns a wazero path ("", ".", "/", "a/b") into an os.Root name.
func rootName(p string) string {
	p = strings.TrimLeft(p, "/")
	if p == "" {
		return "."
	}
	return p
}

// errno maps an os.Root failure to an errno; a path that would leave the
// root is a denial.
func (r *rootFS) errno(op, name string, err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	if !leavesRoot(err) {
		return experimentalsys.UnwrapOSError(err)
	}
	r.denied.add("%s %q: leads outside the granted dir %s through a symbolic link", op, path.Join(r.guest, name), r.guest)
	return experimentalsys.EPERM
}

// leavesRoot reports whether err is os.Root's refusal of a path that
// would leave it: unlike its other failures, that is not an errno.
func leavesRoot(err error) bool {
	var errno syscall.Errno
	return err != nil && !errors.As(err, &errno) && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrExist) &&
		!errors.Is(err, fs.ErrClosed)
}

// OpenFile implements sys.FS.
func (r *rootFS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	name := rootName(p)
	if flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR|experimentalsys.O_CREAT|experimentalsys.O_TRUNC|experimentalsys.O_APPEND) != 0 {
		if errno := r.writes(); errno != 0 {
			return nil, errno
		}
	}
	// Non-blocking, so that opening a FIFO cannot hang the call past its
	// deadline: no safepoint runs while a host call blocks.
	f, err := r.root.OpenFile(name, osFlags(flag)|openNonblock, perm)
	if errno := r.errno("open", name, err); errno != 0 {
		return nil, errno
	}
	if fi, err := f.Stat(); err != nil || !(fi.Mode().IsRegular() || fi.IsDir()) {
		// FIFOs, sockets and devices could block, or never end.
		f.Close()
		return nil, experimentalsys.EACCES
	}
	return &rootFile{fs: r, name: name, f: f, append: flag&experimentalsys.O_APPEND != 0}, 0
}

// osFlags maps wazero's open flags to the os package's. O_DIRECTORY and
// O_NOFOLLOW are left out: wazero checks O_DIRECTORY itself after the
// open, and os.Root never follows a link out of the root anyway.
func osFlags(flag experimentalsys.Oflag) int {
	var f int
	switch flag & (experimentalsys.O_RDONLY | experimentalsys.O_RDWR | experimentalsys.O_WRONLY) {
	case experimentalsys.O_RDWR:
		f = os.O_RDWR
	case experimentalsys.O_WRONLY:
		f = os.O_WRONLY
	default:
		f = os.O_RDONLY
	}
	for _, m := range []struct {
		sys experimentalsys.Oflag
		os  int
	}{
		{experimentalsys.O_APPEND, os.O_APPEND},
		{experimentalsys.O_CREAT, os.O_CREATE},
		{experimentalsys.O_EXCL, os.O_EXCL},
		{experimentalsys.O_SYNC, os.O_SYNC},
		{experimentalsys.O_TRUNC, os.O_TRUNC},
	} {
		if flag&m.sys != 0 {
			f |= m.os
		}
	}
	return f
}

// Stat implements sys.FS.
func (r *rootFS) Stat(p string) (wazerosys.Stat_t, experimentalsys.Errno) {
	name := rootName(p)
	fi, err := r.root.Stat(name)
	if errno := r.errno("stat", name, err); errno != 0 {
		return wazerosys.Stat_t{}, errno
	}
	return wazerosys.NewStat_t(fi), 0
}

// Lstat implements sys.FS.
func (r *rootFS) Lstat(p string) (wazerosys.Stat_t, experimentalsys.Errno) {
	name := rootName(p)
	fi, err := r.root.Lstat(name)
	if errno := r.errno("lstat", name, err); errno != 0 {
		return wazerosys.Stat_t{}, errno
	}
	return wazerosys.NewStat_t(fi), 0
}

// Mkdir implements sys.FS.
func (r *rootFS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	if errno := r.writes(); errno != 0 {
		return errno
	}
	name := rootName(p)
	return r.errno("mkdir", name, r.root.Mkdir(name, perm))
}

// Chmod implements sys.FS.
func (r *rootFS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	if errno := r.writes(); errno != 0 {
		return errno
	}
	name := rootName(p)
	return r.errno("chmod", name, r.root.Chmod(name, perm))
}

// Rename implements sys.FS. A link, or a directory with links under it,
// may move only where each link still leads inside the grant.
func (r *rootFS) Rename(from, to string) experimentalsys.Errno {
	return r.move("rename", from, to, r.root.Rename)
}

// move checks that op (a rename, or a hard link) from one path to another
// leaves no link leading out of the grant, then does it.
func (r *rootFS) move(op, fromPath, toPath string, do func(from, to string) error) experimentalsys.Errno {
	if errno := r.writes(); errno != 0 {
		return errno
	}
	from, to := rootName(fromPath), rootName(toPath)
	r.links.Lock()
	defer r.links.Unlock()
	if why, err := r.moveLeadsOut(from, to); err != nil {
		return r.errno(op, from, err)
	} else if why != "" {
		return r.refuseLink("%s %q to %q: %s", op, path.Join(r.guest, from), path.Join(r.guest, to), why)
	}
	return r.errno(op, from+" to "+to, do(from, to))
}

// Rmdir implements sys.FS.
func (r *rootFS) Rmdir(p string) experimentalsys.Errno {
	if errno := r.writes(); errno != 0 {
		return errno
	}
	name := rootName(p)
	if fi, err := r.root.Lstat(name); err != nil {
		return r.errno("rmdir", name, err)
	} else if !fi.IsDir() {
		return experimentalsys.ENOTDIR
	}
	return r.errno("rmdir", name, r.root.Remove(name))
}

// Unlink implements sys.FS.
func (r *rootFS) Unlink(p string) experimentalsys.Errno {
	if errno := r.writes(); errno != 0 {
		return errno
	}
	name := rootName(p)
	if fi, err := r.root.Lstat(name); err != nil {
		return r.errno("unlink", name, err)
	} else if fi.IsDir() {
		return experimentalsys.EISDIR
	}
	return r.errno("unlink", name, r.root.Remove(name))
}

// Link implements sys.FS. A hard link to a symbolic link is that link in
// a second place, where it must lead inside the grant too.
func (r *rootFS) Link(oldPath, newPath string) experimentalsys.Errno {
	return r.move("link", oldPath, newPath, r.root.Link)
}

// Symlink implements sys.FS. The link must lead inside the grant: os.Root
// would never follow it out, but the host might.
func (r *rootFS) Symlink(target, link string) experimentalsys.Errno {
	if errno := r.writes(); errno != 0 {
		return errno
	}
	name := rootName(link)
	r.links.Lock()
	defer r.links.Unlock()
	if _, err := r.root.Lstat(name); err == nil {
		// Not made, whatever its target: no denial for a link that never was.
		return experimentalsys.EEXIST
	}
	if why := r.linkLeadsOut(path.Dir(name), target); why != "" {
		return r.refuseLink("symlink %q -> %q: %s", path.Join(r.guest, name), target, why)
	}
	return r.errno("symlink", name, r.root.Symlink(target, name))
}

// Readlink implements sys.FS.
func (r *rootFS) Readlink(p string) (string, experimentalsys.Errno) {
	name := rootName(p)
	target, err := r.root.Readlink(name)
	if errno := r.errno("readlink", name, err); errno != 0 {
		return "", errno
	}
	return target, 0
}

// Utimens implements sys.FS.
func (r *rootFS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	if errno := r.writes(); errno != 0 {
		return errno
	}
	name := rootName(p)
	return r.errno("utimens", name, r.root.Chtimes(name, utime(atim), utime(mtim)))
}

// utime turns a wazero timestamp into what Chtimes takes: the zero Time
// leaves a time unchanged, as UTIME_OMIT asks.
func utime(ns int64) time.Time {
	if ns == experimentalsys.UTIME_OMIT {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// rootFile is a file opened through a rootFS.
type rootFile struct {
	fs     *rootFS
	name   string
	f      *os.File
	append bool
	st     *wazerosys.Stat_t // what does not change while the file is open
}

func (f *rootFile) cachedStat() (wazerosys.Stat_t, experimentalsys.Errno) {
	if f.st == nil {
		st, errno := f.Stat()
		if errno != 0 {
			return st, errno
		}
		f.st = &st
	}
	return *f.st, 0
}

// Dev implements sys.File.
func (f *rootFile) Dev() (uint64, experimentalsys.Errno) {
	st, errno := f.cachedStat()
	return st.Dev, errno
}

// Ino implements sys.File.
func (f *rootFile) Ino() (wazerosys.Inode, experimentalsys.Errno) {
	st, errno := f.cachedStat()
	return st.Ino, errno
}

// IsDir implements sys.File.
func (f *rootFile) IsDir() (bool, experimentalsys.Errno) {
	st, errno := f.cachedStat()
	return st.Mode.IsDir(), errno
}

// IsAppend implements sys.File.
func (f *rootFile) IsAppend() bool { return f.append }

// SetAppend implements sys.File. The append mode of an open file cannot
// be changed through the os package; tools set it when they open.
func (f *rootFile) SetAppend(bool) experimentalsys.Errno { return experimentalsys.ENOSYS }

// Stat implements sys.File.
func (f *rootFile) Stat() (wazerosys.Stat_t, experimentalsys.Errno) {
	fi, err := f.f.Stat()
	if err != nil {
		return wazerosys.Stat_t{}, experimentalsys.UnwrapOSError(err)
	}
	return wazerosys.NewStat_t(fi), 0
}

// Read implements sys.File.
func (f *rootFile) Read(buf []byte) (int, experimentalsys.Errno) {
	n, err := f.f.Read(buf)
	return n, ioErrno(err)
}

// Pread implements sys.File.
func (f *rootFile) Pread(buf []byte, off int64) (int, experimentalsys.Errno) {
	n, err := f.f.ReadAt(buf, off)
	return n, ioErrno(err)
}

// fileOffset is int64 under another name. sys.File's Seek returns an
// Errno where io.Seeker returns an error, and go vet takes any Seek with
// an int64 offset for a wrong io.Seeker; the alias tells it otherwise.
type fileOffset = int64

// Seek implements sys.File. Seeking a directory to 0 rewinds its listing.
func (f *rootFile) Seek(offset fileOffset, whence int) (int64, experimentalsys.Errno) {
	n, err := f.f.Seek(offset, whence)
	return n, ioErrno(err)
}

// Readdir implements sys.File.
func (f *rootFile) Readdir(n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	entries, err := f.f.ReadDir(n)
	if errno := ioErrno(err); errno != 0 {
		return nil, errno
	}
	out := make([]experimentalsys.Dirent, 0, len(entries))
	for _, e := range entries {
		d := experimentalsys.Dirent{Name: e.Name(), Type: e.Type()}
		if fi, err := e.Info(); err == nil {
			d.Ino = wazerosys.NewStat_t(fi).Ino
		}
		out = append(out, d)
	}
	return out, 0
}

// Write implements sys.File.
func (f *rootFile) Write(buf []byte) (int, experimentalsys.Errno) {
	n, err := f.f.Write(buf)
	return n, ioErrno(err)
}

// Pwrite implements sys.File.
func (f *rootFile) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	n, err := f.f.WriteAt(buf, off)
	return n, ioErrno(err)
}

// Truncate implements sys.File.
func (f *rootFile) Truncate(size int64) experimentalsys.Errno {
	if size < 0 {
		return experimentalsys.EINVAL
	}
	return ioErrno(f.f.Truncate(size))
}

// Sync implements sys.File.
func (f *rootFile) Sync() experimentalsys.Errno { return ioErrno(f.f.Sync()) }

// Datasync implements sys.File.
func (f *rootFile) Datasync() experimentalsys.Errno { return ioErrno(f.f.Sync()) }

// Utimens implements sys.File, through the root by the name the file was
// opened with.
func (f *rootFile) Utimens(atim, mtim int64) experimentalsys.Errno {
	return f.fs.Utimens(f.name, atim, mtim)
}

// Close implements sys.File.
func (f *rootFile) Close() experimentalsys.Errno { return ioErrno(f.f.Close()) }

// ioErrno maps an I/O error to an errno; reaching the end is not an error.
func ioErrno(err error) experimentalsys.Errno {
	if err == nil || err == io.EOF {
		return 0
	}
	return experimentalsys.UnwrapOSError(err)
}

// mountFS opens the granted dirs of one call, each confined by an os.Root
// and read-only where granted so. closeFS releases them after the call.
// links is the sandbox's: see rootFS.links.
func mountFS(mounts []Mount, denied *denials, links *sync.Mutex) (fsc wazero.FSConfig, closeFS func(), err error) {
	fsc = wazero.NewFSConfig()
	var roots []*os.Root
	closeFS = func() {
		for _, r := range roots {
			r.Close()
		}
	}
	for _, m := range mounts {
		root, err := m.open()
		if err != nil {
			closeFS()
			return nil, nil, fmt.Errorf("granted dir %s: %w", m.GuestPath, err)
		}
		roots = append(roots, root)
		dir := &rootFS{root: root, guest: m.GuestPath, readOnly: m.ReadOnly, denied: denied, links: links}
		fsc = fsc.(sysfs.FSConfig).WithSysFSMount(dir, m.GuestPath)
	}
	return fsc, closeFS, nil
}
