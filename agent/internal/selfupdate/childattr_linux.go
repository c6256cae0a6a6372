package selfupdate

import "syscall"

// childAttr makes a child die with its supervisor (SIGKILL'd, or its
// power cut): a supervisor started again never finds an agent of its
// predecessor still holding the data dir.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
