package link

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/require"
)

// TestStampede measures what the two survivors of three aip-server
// processes see when the third, holding a third of the links, is killed
// -9: the links' reconnections per 100 ms, how long until all moved,
// the failures, and the survivors' CPU; with the link's pace, and with
// every wait at 1 ns (everyone at once). The links are real Links, many
// in this process. It runs only with EDGEAIP_STAMPEDE_LINKS=N
// (BENCHMARKS.md, "Agents with several servers").
func TestStampede(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("EDGEAIP_STAMPEDE_LINKS"))
	if n <= 0 {
		t.Skip("EDGEAIP_STAMPEDE_LINKS=N measures N links moving off a killed aip-server")
	}
	rounds := 2
	if r, err := strconv.Atoi(os.Getenv("EDGEAIP_STAMPEDE_ROUNDS")); err == nil {
		rounds = r
	}
	bin := testenv.Command(t, "aip-server")
	template, tokens := enrolledDataDir(t, bin, n)
	for r := range rounds {
		for _, mode := range []struct {
			name string
			pace Pace
		}{{"jittered", Pace{}}, {"at-once", Pace{Base: 1, Max: 1, Gap: 1}}} {
			t.Run(fmt.Sprintf("%s/%d", mode.name, r), func(t *testing.T) {
				t.Log(stampede(t, bin, template, tokens, mode.pace))
			})
		}
	}
}

// stampede runs one measurement on three servers started on copies of
// template, each of which knows the devices with the token files tokens.
func stampede(t *testing.T, bin, template string, tokens []string, pace Pace) string {
	var servers [3]*serverProc
	var urls []string
	for i := range servers {
		data := filepath.Join(t.TempDir(), "data")
		require.NoError(t, os.CopyFS(data, os.DirFS(template)))
		servers[i] = startServer(t, bin, data)
		urls = append(urls, servers[i].wsURL())
	}
	ev := &linkEvents{}
	// One outbox for all: it stays empty, as no command is sent, and an
	// outbox of each would take two descriptors more per link, of the
	// 20 000 this process may hold.
	ob := openOutbox(t, "fleet", slog.New(eventHandler{ev: ev}))
	for i, tok := range tokens {
		runLink(t, deviceID(i), urls, tok, ob, slog.New(eventHandler{ev: ev, dev: i}), func(o *Options) { o.Pace = pace })
	}
	require.Eventually(t, func() bool { return len(ev.where(time.Time{})) == len(tokens) }, 5*time.Minute, 100*time.Millisecond)
	// Links count as stable once up for the time in which a dead link is
	// noticed, 60 s: they must be, as a fleet's are, for the backoff to
	// start over when they drop. A shorter ping interval would shorten
	// the wait, but its shorter pong deadline (a fifth of it) drops links
	// at survivors too busy to answer in time: at 5 s, a second, most of
	// the links of the survivors dropped in a stampede, and came back.
	time.Sleep(protocol.ConnOptions{}.NoticedWithin() + time.Second)

	victim, survivors := servers[0], servers[1:]
	var moved []int
	for dev, url := range ev.where(time.Time{}) {
		if url == urls[0] {
			moved = append(moved, dev)
		}
	}
	cpu := &cpuSamples{}
	stopSampling := cpu.sample(survivors[0].cmd.Process.Pid, survivors[1].cmd.Process.Pid)
	killed := time.Now()
	victim.kill()
	require.Eventually(t, func() bool {
		back := ev.where(killed)
		for _, dev := range moved {
			if _, ok := back[dev]; !ok {
				return false
			}
		}
		return true
	}, 5*time.Minute, 20*time.Millisecond, "the links of the killed server moved")
	allMoved := time.Since(killed)
	time.Sleep(500 * time.Millisecond)
	stopSampling()
	return report(ev, killed, allMoved, len(moved), urls, cpu)
}

// report summarizes a measurement: the reconnections after killed, per
// 100 ms at each survivor, the failures there, and the CPU.
func report(ev *linkEvents, killed time.Time, allMoved time.Duration, moved int, urls []string, cpu *cpuSamples) string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	const bucket = 100 * time.Millisecond
	perBucket := map[string]map[int]int{}
	var delays []time.Duration
	for _, e := range ev.regs {
		if e.at.Before(killed) {
			continue
		}
		d := e.at.Sub(killed)
		delays = append(delays, d)
		if perBucket[e.server] == nil {
			perBucket[e.server] = map[int]int{}
		}
		perBucket[e.server][int(d/bucket)]++
	}
	slices.Sort(delays)
	var peaks []string
	for _, u := range urls[1:] {
		peak, busy := 0, 0
		for _, c := range perBucket[u] {
			peak = max(peak, c)
			busy++
		}
		peaks = append(peaks, fmt.Sprintf("%d in its busiest 100 ms, %d 100-ms slots with any", peak, busy))
	}
	failed, why := 0, map[string]int{}
	for _, e := range ev.downs {
		if !e.at.Before(killed) && e.server != urls[0] {
			failed++
			why[errorKind.ReplaceAllString(e.err, "")]++
		}
	}
	var histogram []int // both survivors, per 100 ms
	for _, d := range delays {
		for int(d/bucket) >= len(histogram) {
			histogram = append(histogram, 0)
		}
		histogram[d/bucket]++
	}
	q := func(p float64) time.Duration { return delays[int(p*float64(len(delays)-1))].Round(time.Millisecond) }
	return fmt.Sprintf("%d links moved; all registered again after %s (p50 %s, p90 %s); survivors: %s; "+
		"%d failed attempts at the survivors %v; survivors' CPU %s over the move, peak %.0f%% of a core in 100 ms; "+
		"registrations per 100 ms at both %v",
		moved, allMoved.Round(time.Millisecond), q(0.5), q(0.9), strings.Join(peaks, " / "),
		failed, why, cpu.total().Round(time.Millisecond), cpu.peak()*100, histogram)
}

// errorKind is what differs between errors of one kind: addresses.
var errorKind = regexp.MustCompile(`127\.0\.0\.1:\d+`)

// linkEvents are the registrations of many links, and their drops, from
// their logs.
type linkEvents struct {
	mu    sync.Mutex
	regs  []linkEvent
	downs []linkEvent
}

type linkEvent struct {
	dev    int
	server string
	err    string
	at     time.Time
}

// where is the server each device last registered with, of those that
// registered since since.
func (ev *linkEvents) where(since time.Time) map[int]string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	out := map[int]string{}
	for _, e := range ev.regs {
		if !e.at.Before(since) {
			out[e.dev] = e.server
		}
	}
	return out
}

// eventHandler is the slog.Handler of one link: it keeps its
// registrations and drops in ev.
type eventHandler struct {
	ev  *linkEvents
	dev int
}

func (h eventHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h eventHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h eventHandler) WithGroup(string) slog.Handler                { return h }

func (h eventHandler) Handle(_ context.Context, r slog.Record) error {
	e := linkEvent{dev: h.dev, at: r.Time}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "server":
			e.server = a.Value.Resolve().String()
		case "err":
			e.err = a.Value.String()
		}
		return true
	})
	h.ev.mu.Lock()
	defer h.ev.mu.Unlock()
	switch {
	case r.Message == "registered":
		h.ev.regs = append(h.ev.regs, e)
	case strings.HasPrefix(r.Message, "link down"):
		h.ev.downs = append(h.ev.downs, e)
	}
	return nil
}

// cpuSamples are the CPU time of processes, every 100 ms.
type cpuSamples struct {
	mu  sync.Mutex
	at  []time.Time
	cpu []time.Duration
}

// sample reads the CPU time of pids every 100 ms until the returned
// function is called.
func (c *cpuSamples) sample(pids ...int) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			var sum time.Duration
			read := true
			for _, pid := range pids {
				cpu, err := procCPU(pid)
				sum, read = sum+cpu, read && err == nil
			}
			if read {
				c.mu.Lock()
				c.at, c.cpu = append(c.at, time.Now()), append(c.cpu, sum)
				c.mu.Unlock()
			}
			// Slept, not ticked: a tick that waited while the machine
			// was busy would make the next interval a few microseconds.
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); <-finished }
}

func (c *cpuSamples) total() time.Duration { return c.cpu[len(c.cpu)-1] - c.cpu[0] }

// peak is the largest share of a core used between two samples.
func (c *cpuSamples) peak() float64 {
	var p float64
	for i := 1; i < len(c.cpu); i++ {
		p = max(p, float64(c.cpu[i]-c.cpu[i-1])/float64(c.at[i].Sub(c.at[i-1])))
	}
	return p
}

// procCPU is the user and system time of pid, from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields start after the command name's closing parenthesis; utime
	// and stime are the 14th and 15th, in USER_HZ (100 on Linux).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

func deviceID(i int) string { return fmt.Sprintf("dev-%d", i) }

// serverProc is an aip-server process on loopback.
type serverProc struct {
	cmd  *exec.Cmd
	addr string
	api  *api.Client
}

var listening = regexp.MustCompile(`msg="aip-server listening" addr=(\S+)`)

// startServer runs bin on a free loopback port with data as its data
// dir, until the test ends.
func startServer(t testing.TB, bin, data string) *serverProc {
	t.Helper()
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--data", data)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &serverProc{cmd: cmd}
	t.Cleanup(p.kill)
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			p.addr = m[1]
			break
		}
	}
	require.NotEmpty(t, p.addr, "aip-server did not say where it listens")
	go func() {
		for sc.Scan() {
		}
	}()
	token, err := os.ReadFile(filepath.Join(data, "admin.token"))
	require.NoError(t, err)
	p.api = &api.Client{BaseURL: "http://" + p.addr, Token: strings.TrimSpace(string(token))}
	return p
}

func (p *serverProc) wsURL() string { return "ws://" + p.addr + "/ws" }

// kill ends the process with SIGKILL.
func (p *serverProc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}

// enrolledDataDir is the data dir of a stopped aip-server that enrolled
// n devices, and token files of theirs.
func enrolledDataDir(t *testing.T, bin string, n int) (string, []string) {
	data, dir := filepath.Join(t.TempDir(), "data"), t.TempDir()
	p := startServer(t, bin, data)
	tokens := make([]string, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				resp, err := p.api.Enroll(context.Background(), api.EnrollRequest{ID: deviceID(i)})
				if err != nil {
					t.Errorf("enroll %s: %v", deviceID(i), err)
					continue
				}
				tokens[i] = filepath.Join(dir, deviceID(i)+".token")
				if err := os.WriteFile(tokens[i], []byte(resp.Token), 0o600); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	require.False(t, t.Failed())
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
	return data, tokens
}
