package selfupdate

import (
	"os"
	"os/exec"
	"syscall"
)

// childAttr makes a child die with its supervisor (SIGKILL'd, or its
// power cut): a supervisor started again never finds an agent of its
// predecessor still holding the data dir.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

// execChecked makes cmd execute the file checked, open in the child as
// its fd 3, rather than the name it was opened by: a file renamed over
// that name after the check is not the one that runs.
func execChecked(cmd *exec.Cmd, checked *os.File) {
	cmd.ExtraFiles = []*os.File{checked}
	cmd.Path = "/proc/self/fd/3"
}
