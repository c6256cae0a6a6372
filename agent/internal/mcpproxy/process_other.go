//go:build !unix

package mcpproxy

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup does nothing where there are no process groups.
func setProcessGroup(*exec.Cmd) {}

// signalGroup kills p alone where there are no process groups.
func signalGroup(p *os.Process, _ syscall.Signal) { p.Kill() }
