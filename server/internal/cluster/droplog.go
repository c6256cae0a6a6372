package cluster

import (
	"log/slog"
	"sync"
	"time"
)

// dropLog logs the inter-node messages a node drops or refuses: each one
// while they are few, then how many more at the end of the window, so
// that a flood of them (a bug's, an attacker's) is not a flood of log
// lines too.
type dropLog struct {
	log   *slog.Logger
	every time.Duration // the window
	burst int           // logged one by one in a window

	mu          sync.Mutex
	windowStart time.Time
	inWindow    int
	suppressed  int
}

// Defaults of dropLog: ten a minute, logged one by one.
const (
	dropLogEvery = time.Minute
	dropLogBurst = 10
)

func newDropLog(log *slog.Logger) *dropLog {
	return &dropLog{log: log, every: dropLogEvery, burst: dropLogBurst}
}

// dropped logs msg with args, unless the window's burst is spent: then
// it is counted, and the count logged when the window ends.
func (d *dropLog) dropped(msg string, args ...any) {
	d.mu.Lock()
	now := time.Now()
	if now.Sub(d.windowStart) >= d.every && d.suppressed == 0 {
		d.windowStart, d.inWindow = now, 0
	}
	d.inWindow++
	if d.inWindow <= d.burst {
		d.mu.Unlock()
		d.log.Warn(msg, args...)
		return
	}
	d.suppressed++
	if d.suppressed == 1 {
		time.AfterFunc(d.windowStart.Add(d.every).Sub(now), d.flush)
	}
	d.mu.Unlock()
}

// flush logs how many were dropped unlogged in the window that ended,
// and starts the next.
func (d *dropLog) flush() {
	d.mu.Lock()
	n, window := d.suppressed, d.every
	d.suppressed, d.inWindow, d.windowStart = 0, 0, time.Now()
	d.mu.Unlock()
	d.log.Warn("cluster: more inter-node messages dropped or refused than are logged one by one", "more", n, "window", window)
}
