//go:build !unix

package outbox

import "os"

// lockFile opens path without locking it where flock is missing.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
}
