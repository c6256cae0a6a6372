//go:build !linux

package outbox

import "os"

// datasync is an fsync of f where fdatasync is not to be had.
func datasync(f *os.File) error { return f.Sync() }
