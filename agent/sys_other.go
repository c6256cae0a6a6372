//go:build !unix

package agent

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup does nothing where there are no process groups.
func setProcessGroup(*exec.Cmd) {}

// signalGroup kills p alone where there are no process groups.
func signalGroup(p *os.Process, _ syscall.Signal) { p.Kill() }

// lockFile opens path without locking it where flock is missing.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
}
