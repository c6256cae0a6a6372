//go:build unix

package agent

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup starts cmd in a process group of its own, so that
// signalGroup reaches the children it starts as well.
func setProcessGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// signalGroup signals the process group p leads. Errors are ignored: the
// group may be gone already, which is what the caller wants.
func signalGroup(p *os.Process, sig syscall.Signal) { syscall.Kill(-p.Pid, sig) }

// lockFile holds an exclusive lock on path, created if missing, for as
// long as the returned file stays open. The kernel drops it when the
// process dies, however it dies.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
