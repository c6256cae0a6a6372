package protocol

import (
	"container/heap"
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// Liveness checks connections for silence, all of them from one
// goroutine: a connection silent for its ping threshold gets a WebSocket
// ping, and one silent for its PingInterval and PingTimeout together is
// closed, so that its Read returns and its owner can react. Silence is
// time since anything was last read from the peer: a frame, a ping or a
// pong. A server gives every connection one Liveness (ConnOptions.
// Liveness); a connection given none runs one of its own. See
// RATIONALE.md, "Liveness: one exchange per interval".
type Liveness struct {
	mu    sync.Mutex
	queue dueQueue
	wake  chan struct{} // a check came due sooner than run waits for
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// NewLiveness starts a Liveness. Close stops it.
func NewLiveness() *Liveness {
	l := &Liveness{wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

// Close stops the checks and waits for them to end; the connections it
// watched are not closed.
func (l *Liveness) Close() {
	l.halt()
	<-l.done
}

// halt stops the checks without waiting.
func (l *Liveness) halt() { l.once.Do(func() { close(l.stop) }) }

// watched is a connection's place in a Liveness's queue.
type watched struct {
	due   int64 // unix ns of its next check
	index int   // in the queue; -1 when not in it
}

// watch starts checking c.
func (l *Liveness) watch(c *Conn) {
	l.schedule(c, c.heard.Load()+int64(c.pingAfter()))
}

// unwatch stops checking c, which has closed.
func (l *Liveness) unwatch(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.watched.index >= 0 {
		heap.Remove(&l.queue, c.watched.index)
	}
}

// schedule checks c again at due, unless c has closed meanwhile.
func (l *Liveness) schedule(c *Conn, due int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-c.done: // closed: markDone unwatches it after closing done
		return
	default:
	}
	c.watched.due = due
	if c.watched.index >= 0 {
		heap.Fix(&l.queue, c.watched.index)
	} else {
		heap.Push(&l.queue, c)
	}
	if l.queue[0] == c {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// run checks each connection when it comes due, until Close.
func (l *Liveness) run() {
	defer close(l.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, wait := l.takeDue(time.Now().UnixNano())
		for _, c := range due {
			l.check(c)
		}
		if len(due) > 0 {
			continue // the checks took time: look again before sleeping
		}
		if wait < 0 {
			wait = time.Hour
		}
		timer.Reset(wait)
		select {
		case <-l.stop:
			return
		case <-l.wake:
		case <-timer.C:
		}
	}
}

// takeDue removes from the queue the connections due by now, and says how
// long until the next one is (-1: none is queued).
func (l *Liveness) takeDue(now int64) (due []*Conn, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.queue) > 0 && l.queue[0].watched.due <= now {
		due = append(due, heap.Pop(&l.queue).(*Conn))
	}
	if len(l.queue) == 0 {
		return due, -1
	}
	return due, time.Duration(l.queue[0].watched.due - now)
}

// check acts on c's silence: closes it if it has lasted the whole budget,
// pings it once it has lasted the ping threshold, and schedules the next
// check.
func (l *Liveness) check(c *Conn) {
	heard := c.heard.Load()
	silent := time.Duration(time.Now().UnixNano() - heard)
	dead := c.opts.PingInterval + c.opts.PingTimeout
	switch {
	case silent >= dead:
		c.opts.Logger.Warn("link dead: ping unanswered", "silent", silent.Round(time.Millisecond))
		c.CloseNow()
		return
	case silent >= c.pingAfter():
		if c.pinging.CompareAndSwap(false, true) {
			go l.ping(c, dead-silent)
		}
		l.schedule(c, heard+int64(dead))
	default:
		l.schedule(c, heard+int64(c.pingAfter()))
	}
}

// ping sends one WebSocket ping and waits up to timeout for its pong;
// the pong itself is heard by the read loop. An answered ping puts the
// next check a whole silence after the pong, so that pings keep their
// interval whatever the timeout; an unanswered one is left to the check
// already scheduled, which closes the connection once it has been silent
// too long.
func (l *Liveness) ping(c *Conn, timeout time.Duration) {
	defer c.pinging.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if c.ws.Ping(ctx) == nil {
		l.schedule(c, c.heard.Load()+int64(c.pingAfter()))
	}
}

// dueQueue is a min-heap of connections by the time of their next check.
type dueQueue []*Conn

func (q dueQueue) Len() int           { return len(q) }
func (q dueQueue) Less(i, j int) bool { return q[i].watched.due < q[j].watched.due }
func (q dueQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].watched.index, q[j].watched.index = i, j
}

func (q *dueQueue) Push(x any) {
	c := x.(*Conn)
	c.watched.index = len(*q)
	*q = append(*q, c)
}

func (q *dueQueue) Pop() any {
	old := *q
	c := old[len(old)-1]
	old[len(old)-1] = nil
	c.watched.index = -1
	*q = old[:len(old)-1]
	return c
}

// LinkTransport is the HTTP transport links dial with (Dial's, unless
// told otherwise): Go's default, but without TCP keepalives, which would
// add two segments each time the link idled past 30 s, where the link's
// own pings notice a dead link. A client that needs another transport
// (TLS settings) starts from this one.
func LinkTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: -1}).DialContext
	return t
}
