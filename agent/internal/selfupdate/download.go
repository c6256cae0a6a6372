package selfupdate

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
	"github.com/edgeaip/edgeaip/internal/atomicfile"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/klauspost/compress/zstd"
)

// maxWindow bounds the memory a release's decompression takes: the
// server compresses with a window of at most 4 MiB.
const maxWindow = 8 << 20

// accept checks that a release may be installed here: signed by a
// trusted release key, and built for this device's platform.
func accept(r agentrelease.Release, keys []ed25519.PublicKey) error {
	if err := r.Verify(keys); err != nil {
		return fmt.Errorf("release %s refused: %w", r.Version, err)
	}
	if r.OS != runtime.GOOS || r.Arch != runtime.GOARCH {
		return fmt.Errorf("release %s refused: it is built for %s, and this device is %s/%s", r.Version, r.Platform(), runtime.GOOS, runtime.GOARCH)
	}
	return nil
}

// staged is how far a release's download is: the bytes of its stream
// the device holds, and whether it is installed.
type staged struct {
	Have      int64
	Installed bool
}

// stage takes one chunk of a release's stream: it appends the chunk if
// it starts where the device's copy ends (a chunk sent again, after a cut
// link, is answered without writing), and installs the release once the
// stream is whole. The answer says where the next chunk starts.
func (d Dir) stage(c protocol.ReleaseChunk, keys []ed25519.PublicKey) (staged, error) {
	if err := accept(c.Release, keys); err != nil {
		return staged{}, err
	}
	if d.installed(c.Release) == nil {
		os.Remove(d.incoming(c.Release.SHA256)) // left by a crash after the install
		return staged{Have: c.Total, Installed: true}, nil
	}
	have, err := d.appendChunk(c)
	if err != nil {
		return staged{}, err
	}
	if have < c.Total {
		return staged{Have: have}, nil
	}
	if err := d.install(c.Release); err != nil {
		return staged{}, err
	}
	return staged{Have: have, Installed: true}, nil
}

// appendChunk writes c at the end of the incoming stream if it starts
// there, durably, and answers the stream's length. A write that fails
// (a full disk) removes the stream: the device keeps no half of a
// release it cannot finish.
func (d Dir) appendChunk(c protocol.ReleaseChunk) (int64, error) {
	path := d.incoming(c.Release.SHA256)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return 0, fmt.Errorf("release %s: %w", c.Release.Version, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, fmt.Errorf("release %s: %w", c.Release.Version, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("release %s: %w", c.Release.Version, err)
	}
	have := st.Size()
	if have > c.Total {
		have = 0 // a stream of another encoding: start again
		if err := f.Truncate(0); err != nil {
			return 0, fmt.Errorf("release %s: %w", c.Release.Version, err)
		}
	}
	if len(c.Data) == 0 || c.Offset != have {
		return have, nil
	}
	_, err = f.WriteAt(c.Data, have)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return 0, fmt.Errorf("release %s: keeping its download: %w%s", c.Release.Version, err, fullDiskHint(err))
	}
	return have + int64(len(c.Data)), nil
}

// install decompresses the whole stream into bin/SHA256, checking the
// release's size and digest, and removes the stream.
func (d Dir) install(r agentrelease.Release) error {
	in := d.incoming(r.SHA256)
	defer os.Remove(in) // whole or not: a damaged stream is sent again
	src, err := os.Open(in)
	if err != nil {
		return fmt.Errorf("release %s: %w", r.Version, err)
	}
	defer src.Close()
	dec, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(maxWindow))
	if err != nil {
		return fmt.Errorf("release %s: %w", r.Version, err)
	}
	defer dec.Close()
	dst := d.binary(r.SHA256)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("release %s: %w", r.Version, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-"+r.SHA256+"-*")
	if err != nil {
		return fmt.Errorf("release %s: %w", r.Version, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if err := copyChecked(tmp, dec, r); err != nil {
		tmp.Close()
		return fmt.Errorf("release %s: %w%s", r.Version, err, fullDiskHint(err))
	}
	if err := tmp.Chmod(0o700); err != nil {
		tmp.Close()
		return fmt.Errorf("release %s: %w", r.Version, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("release %s: %w", r.Version, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("release %s: %w", r.Version, err)
	}
	return atomicfile.SyncDir(filepath.Dir(dst))
}

// copyChecked copies the decompressed release into f, durably, and
// checks its size and digest.
func copyChecked(f *os.File, dec io.Reader, r agentrelease.Release) error {
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(dec, r.Size+1))
	if err != nil {
		return err
	}
	if n != r.Size || !r.SameDigest(h.Sum(nil)) {
		return fmt.Errorf("the download is not the release: %d bytes with another SHA-256, where the release is %d bytes", n, r.Size)
	}
	return f.Sync()
}

// installed checks the installed binary of r: its size and digest.
func (d Dir) installed(r agentrelease.Release) error {
	f, err := d.openInstalled(r)
	if err == nil {
		f.Close()
	}
	return err
}

// openInstalled opens the installed binary of r and checks it, through
// the file it answers: its size and digest. The data dir is writable by
// the agent itself, so the check is made before every start, and the
// agent is started from this file, not from its name, which another can
// be renamed to after the check.
func (d Dir) openInstalled(r agentrelease.Release) (*os.File, error) {
	f, err := os.Open(d.binary(r.SHA256))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("release %s is not installed", r.Version)
		}
		return nil, fmt.Errorf("release %s: %w", r.Version, err)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("release %s: %w", r.Version, err)
	}
	if n != r.Size || !r.SameDigest(h.Sum(nil)) {
		f.Close()
		return nil, fmt.Errorf("release %s: its installed binary was altered: %d bytes, not the release's %d with SHA-256 %.12s", r.Version, n, r.Size, r.SHA256)
	}
	return f, nil
}

// fullDiskHint says what to do when err is a full disk.
func fullDiskHint(err error) string {
	if errors.Is(err, syscall.ENOSPC) {
		return " (the disk is full: the release is refused, and the agent that runs stays)"
	}
	return ""
}
