//go:build linux

package meter_test

import (
	"syscall"
	"time"
)

// rusageThread is Linux's RUSAGE_THREAD, missing from package syscall.
const rusageThread = 1

// threadCPU returns the CPU time the calling thread has used. Unlike wall
// time, it leaves out the time the thread waited for a core, so it holds
// steady on a machine other work is loading.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
