package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"golang.org/x/sys/unix"
)

// livenessConfig is how the simulated idle devices keep their links
// alive, as the agent under test does: main's agent sends a HEARTBEAT
// every 20 s and a WebSocket ping every 15 s, and its sockets send TCP
// keepalives after 30 s idle (Go's default dialer); this branch's agent
// pings after 50 s of silence and nothing else.
type livenessConfig struct {
	heartbeat   time.Duration // a HEARTBEAT this often; 0: none
	pingEvery   time.Duration // a WebSocket ping this often; 0: none
	pingSilence time.Duration // a WebSocket ping after this long without a frame from the server; 0: none
	keepalive   time.Duration // TCP keepalive idle and interval; 0: off
}

// idleConfig is what the idle mode runs.
type idleConfig struct {
	links    int
	settle   time.Duration // after the last link registered, before the memory is read
	window   time.Duration // idle time over which CPU and bytes are measured
	liveness livenessConfig
	kill     bool // after window, kill the last node and time its devices registering again
}

// idleRun is what one run measured.
type idleRun struct {
	links              int
	rssBase, rssLinked int64 // KiB: before the links, and once they registered
	rssIdle            int64 // KiB: after window
	cpu                time.Duration
	window             time.Duration
	wireBytes          int64 // frames and TCP/IP headers, both ways, over window
	dropped            int64
	rejoin             time.Duration // from killing a node until its devices registered again
}

func (r idleRun) kibPerLink(rss int64) float64 { return float64(rss-r.rssBase) / float64(r.links) }
func (r idleRun) cpuShare() float64            { return r.cpu.Seconds() / r.window.Seconds() }
func (r idleRun) bytesPerLinkDay() float64 {
	return float64(r.wireBytes) / float64(r.links) * (24 * time.Hour).Seconds() / r.window.Seconds()
}

// runIdle starts bin's nodes, opens cfg.links registered links from one
// epoll reader, link i to node i mod nodes, then leaves them idle,
// answering the server's pings and keeping cfg.liveness, and measures the
// nodes, summed. With cfg.kill, it then kills the last node (SIGKILL) and
// times its devices registering again on the others.
func runIdle(ctx context.Context, bin serverBin, work string, cc clusterConfig, cfg idleConfig) (idleRun, error) {
	f, tokens, err := startFleet(ctx, bin, work, cc, cfg.links)
	if err != nil {
		return idleRun{}, err
	}
	defer f.stop()
	time.Sleep(2 * time.Second)
	run := idleRun{links: cfg.links, window: cfg.window}
	if run.rssBase, err = f.rssKiB(); err != nil {
		return run, err
	}
	pool, err := newIdlePool(cfg.liveness)
	if err != nil {
		return run, err
	}
	defer pool.close()
	all := make([]int, len(tokens))
	for i := range all {
		all[i] = i
	}
	if err := pool.connect(all, f.dialer(len(f.nodes)), tokens, time.Time{}); err != nil {
		return run, err
	}
	time.Sleep(cfg.settle)
	if run.rssLinked, err = f.rssKiB(); err != nil {
		return run, err
	}
	cpu0, err := f.cpu()
	if err != nil {
		return run, err
	}
	wire0 := pool.wireBytes()
	time.Sleep(cfg.window)
	cpu1, err := f.cpu()
	if err != nil {
		return run, err
	}
	run.cpu, run.wireBytes, run.dropped = cpu1-cpu0, pool.wireBytes()-wire0, pool.dropped.Load()
	if run.rssIdle, err = f.rssKiB(); err != nil {
		return run, err
	}
	if cfg.kill {
		run.rejoin, err = f.killLast(pool, tokens)
	}
	return run, err
}

// rejoinLimit bounds how long killLast waits for the killed node's
// devices to register again.
const rejoinLimit = 2 * time.Minute

// killLast kills the fleet's last node as a crash would, and has each of
// its devices register again, at once and then every 100 ms until
// accepted, on the node i mod (nodes-1), as an agent with every node's
// URL moves on; it returns the time from the kill until the last one was
// registered. The harness redials as soon as it is told, where an agent
// would first notice the drop and back off.
func (f *fleet) killLast(pool *idlePool, tokens []string) (time.Duration, error) {
	n := len(f.nodes)
	if n < 2 {
		return 0, fmt.Errorf("-kill needs 2 nodes or more, not %d", n)
	}
	var moved []int
	for i := range tokens {
		if i%n == n-1 {
			moved = append(moved, i)
		}
	}
	last := f.nodes[n-1]
	start := time.Now()
	if err := last.Cmd.Process.Kill(); err != nil {
		return 0, fmt.Errorf("kill node %d: %w", n, err)
	}
	if err := pool.connect(moved, f.dialer(n-1), tokens, start.Add(rejoinLimit)); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// dialer is where device i links: node i mod n.
func (f *fleet) dialer(n int) func(int) netip.AddrPort {
	return func(i int) netip.AddrPort { return netip.MustParseAddrPort(f.nodes[i%n].Addr) }
}

// idlePool is many idle device links read by one goroutine through epoll,
// so that the harness holds no goroutine per link.
type idlePool struct {
	live    livenessConfig
	epfd    int
	mu      sync.Mutex
	conns   map[int]*idleConn // by fd
	dropped atomic.Int64
	stop    chan struct{}
	done    sync.WaitGroup
}

// idleConn is one simulated device's link.
type idleConn struct {
	fd      int
	id      string
	wmu     sync.Mutex   // serializes writes: pongs from the reader, pings and heartbeats from the ticker
	heard   atomic.Int64 // unix ns of the last frame from the server
	partial []byte       // an incomplete frame; the reader's
	pings   int64
	// The ticker's: when the next HEARTBEAT and ping are due.
	nextHeartbeat, nextPing time.Time
}

func newIdlePool(live livenessConfig) (*idlePool, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	p := &idlePool{live: live, epfd: epfd, conns: map[int]*idleConn{}, stop: make(chan struct{})}
	p.done.Go(p.read)
	p.done.Go(p.tick)
	return p, nil
}

// connect opens and registers a link for each of devices, device i with
// tokens[i] to dst(i), from several source addresses; a link refused is
// tried again every 100 ms until retryUntil, if that is set.
func (p *idlePool) connect(devices []int, dst func(int) netip.AddrPort, tokens []string, retryUntil time.Time) error {
	srcs := sourceAddrs(len(tokens), 20000)
	next := make(chan int)
	errs := make(chan error, len(devices))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range next {
				for {
					err := p.add(srcs[i%len(srcs)], dst(i), deviceID(i), tokens[i])
					if err == nil {
						break
					}
					if !time.Now().Before(retryUntil) {
						errs <- fmt.Errorf("link %s: %w", deviceID(i), err)
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
	for _, i := range devices {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return errors.Join(collectErrs(errs)...)
}

func (p *idlePool) add(src, dst netip.AddrPort, id, token string) error {
	fd, rest, err := handshake(src, dst, id, token, p.live.keepalive)
	if err != nil {
		return err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return err
	}
	now := time.Now()
	c := &idleConn{fd: fd, id: id, partial: rest, nextHeartbeat: now.Add(p.live.heartbeat), nextPing: now.Add(p.live.pingEvery)}
	c.heard.Store(now.UnixNano())
	p.mu.Lock()
	p.conns[fd] = c
	p.mu.Unlock()
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}); err != nil {
		return fmt.Errorf("epoll add: %w", err)
	}
	return nil
}

// read serves every link's incoming frames until close.
func (p *idlePool) read() {
	events := make([]unix.EpollEvent, 256)
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.EpollWait(p.epfd, events, 200)
		select {
		case <-p.stop:
			return
		default:
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		for _, ev := range events[:max(n, 0)] {
			p.mu.Lock()
			c := p.conns[int(ev.Fd)]
			p.mu.Unlock()
			if c != nil && !p.serve(c, buf) {
				p.drop(c)
			}
		}
	}
}

// serve reads what c has, answers pings, and reports whether the link
// is still up.
func (p *idlePool) serve(c *idleConn, buf []byte) bool {
	n, err := unix.Read(c.fd, buf)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return true
	}
	if err != nil || n == 0 {
		return false
	}
	b := append(c.partial, buf[:n]...)
	for {
		f, used, err := nextFrame(b)
		if err != nil {
			return false
		}
		if used == 0 {
			break
		}
		c.heard.Store(time.Now().UnixNano())
		switch f.op {
		case opPing:
			if c.write(clientFrame(opPong, f.payload)) != nil {
				return false
			}
		case opClose:
			c.write(clientFrame(opClose, f.payload))
			return false
		}
		b = b[used:]
	}
	c.partial = append([]byte(nil), b...)
	return true
}

func (c *idleConn) write(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return writeAll(c.fd, frame)
}

func (p *idlePool) drop(c *idleConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns[c.fd] == c {
		delete(p.conns, c.fd)
		unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
		unix.Close(c.fd)
		p.dropped.Add(1)
	}
}

// tick sends each link's heartbeats and pings when they are due.
func (p *idlePool) tick() {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		p.mu.Lock()
		all := make([]*idleConn, 0, len(p.conns))
		for _, c := range p.conns {
			all = append(all, c)
		}
		p.mu.Unlock()
		now := time.Now()
		for _, c := range all {
			if err := p.keepAlive(c, now); err != nil {
				p.drop(c)
			}
		}
	}
}

// keepAlive sends what c's liveness schedule says is due at now.
func (p *idlePool) keepAlive(c *idleConn, now time.Time) error {
	live := p.live
	if live.heartbeat > 0 && !now.Before(c.nextHeartbeat) {
		c.nextHeartbeat = now.Add(live.heartbeat)
		hb, err := protocol.CBOR.Marshal(&protocol.ClientMessage{Type: protocol.ClientHeartbeat, Status: protocol.StatusOK,
			ClientID: c.id, Timestamp: protocol.Now()})
		if err != nil {
			return err
		}
		if err := c.write(clientFrame(opBinary, hb)); err != nil {
			return err
		}
	}
	silent := now.Sub(time.Unix(0, c.heard.Load()))
	due := (live.pingEvery > 0 && !now.Before(c.nextPing)) || (live.pingSilence > 0 && silent >= live.pingSilence)
	if !due {
		return nil
	}
	c.nextPing = now.Add(live.pingEvery)
	if live.pingSilence > 0 {
		// Waiting for the pong is silence too: ping once per silence.
		c.heard.Store(now.UnixNano())
	}
	c.pings++
	return c.write(clientFrame(opPing, pingPayload(c.pings)))
}

// wireBytes is what every link carried so far, both ways: payload bytes
// and one IPv4 and TCP header per segment, pure ACKs included, from the
// kernel's TCP_INFO counters.
func (p *idlePool) wireBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var total int64
	for fd := range p.conns {
		info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			continue
		}
		hdr := int64(20 + 20)
		if info.Options&tcpiOptTimestamps != 0 {
			hdr += 12
		}
		total += int64(info.Bytes_acked) + int64(info.Bytes_received) + int64(info.Segs_out+info.Segs_in)*hdr
	}
	return total
}

// tcpiOptTimestamps is TCPI_OPT_TIMESTAMPS of linux/tcp.h: the segments
// carry the 12 bytes of the timestamp option.
const tcpiOptTimestamps = 1

func (p *idlePool) close() {
	close(p.stop)
	p.done.Wait()
	p.mu.Lock()
	for fd := range p.conns {
		unix.Close(fd)
	}
	p.conns = nil
	p.mu.Unlock()
	unix.Close(p.epfd)
}
