//go:build unix

package sandbox

import "syscall"

// openNonblock opens files without waiting, e.g. for a FIFO's writer.
const openNonblock = syscall.O_NONBLOCK
