//go:build !linux

package selfupdate

import (
	"os"
	"os/exec"
	"syscall"
)

// childAttr: only Linux kills a child with its parent.
func childAttr() *syscall.SysProcAttr { return nil }

// execChecked: elsewhere the child executes the file by its name.
func execChecked(*exec.Cmd, *os.File) {}
