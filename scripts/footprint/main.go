// Command footprint measures what the agent costs a board: the size of its
// binaries (from `make cross`), the time from start to registered, its
// resident memory once registered with the stock tools loaded, and its
// resident memory while 8 tool calls run at once. `make footprint` runs it
// and BENCHMARKS.md records what it printed. It prints each figure issue 9
// bounds beside its budget, and exits non-zero if one is over it.
//
// It runs the real aip-server and aip-agent of BIN on loopback, each in a
// temporary directory, and reads the agent's memory from /proc (Linux).
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/scripts/internal/aipserver"
	"github.com/edgeaip/edgeaip/server/api"
)

// concurrentCalls is how many tool calls run at once for the busy figure.
const concurrentCalls = 8

// hashFileMemory is the memory limit of the stock hash_file tool
// (wasmtools/tools/hash_file/hash_file.json), which each of its calls
// reserves while it runs: the agent must let concurrentCalls of them
// reserve it together.
const hashFileMemory = 64 << 20

// settle is how long an agent is left once registered before its memory
// is read: start-up leaves garbage that it hands back.
const settle = 3 * time.Second

// unloadAfter is the agent's tools.unload_after here: short, so that the
// figure after unloading takes seconds to measure, not minutes.
const unloadAfter = 5 * time.Second

func main() {
	bin := flag.String("bin", "bin", "directory of aip-server and tools/, and cross/ from make cross")
	agentBin := flag.String("agent", "", "the agent to measure (default BIN/cross/aip-agent-linux-GOARCH, as shipped)")
	runs := flag.Int("runs", 5, "warm starts to time; the median is reported")
	busyMiB := flag.Int("busy-mib", 32, "MiB of the file the concurrent hash_file calls hash: less, on a machine too busy for 8 of them to finish within the tool's 10s")
	flag.Parse()
	if *agentBin == "" {
		*agentBin = filepath.Join(*bin, "cross", "aip-agent-linux-"+runtime.GOARCH)
	}
	// The agent's config resolves relative paths against its own dir.
	for _, p := range []*string{bin, agentBin} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "footprint:", err)
			os.Exit(1)
		}
		*p = abs
	}
	if err := run(*bin, *agentBin, *runs, *busyMiB); err != nil {
		fmt.Fprintln(os.Stderr, "footprint:", err)
		os.Exit(1)
	}
}

func run(bin, agentBin string, runs, busyMiB int) error {
	work, err := os.MkdirTemp("", "edgeaip-footprint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	ctx := context.Background()

	srv, err := aipserver.Start(ctx, filepath.Join(bin, "aip-server"), filepath.Join(work, "server"))
	if err != nil {
		return err
	}
	defer srv.Stop()
	client := srv.API
	token, err := client.Enroll(ctx, api.EnrollRequest{ID: "footprint-1"})
	if err != nil {
		return err
	}
	files := filepath.Join(work, "files")
	if err := writeRandomFile(filepath.Join(files, "big.bin"), int64(busyMiB)<<20); err != nil {
		return err
	}
	a := agentRun{bin: bin, agent: agentBin, work: work, files: files, server: client.BaseURL, token: token.Token, client: client, busyMiB: busyMiB}

	fmt.Println("## Agent footprint (make footprint)")
	fmt.Println()
	var r report
	fmt.Println("| what | figure | budget |")
	fmt.Println("|---|---|---|")
	r.sizes(filepath.Join(bin, "cross"))

	cmd, cold, err := a.startRegistered(ctx)
	if err != nil {
		return err
	}
	stop(cmd)
	// The first start stopped once registered; let one run to the end of
	// instrumenting, as a board's first start does, so that the starts
	// measured next find every tool in the cache.
	firstIdle, err := a.instrumentAll(ctx)
	if err != nil {
		return err
	}
	// The idle memory of one start differs from the next's by up to 3 MiB:
	// each warm start gives a reading.
	var warm []time.Duration
	var idle rssReadings
	for range runs {
		d, kb, err := a.warmStart(ctx)
		if err != nil {
			return err
		}
		warm, idle = append(warm, d), append(idle, kb)
	}
	m, err := a.memory(ctx)
	if err != nil {
		return err
	}
	r.startup(fmt.Sprintf("start to registered, compile cache warm (median of %d)", runs), median(warm))
	r.startup("start to registered, first start on a fresh data dir (tools instrumented in the background)", cold)
	r.idleRSS(fmt.Sprintf("RSS idle after registration, stock tools loaded (median of %d starts)", runs), idle)
	r.row("RSS idle after a first start has instrumented the tools in the background", fmt.Sprintf("%.1f MiB", mib(firstIdle)))
	r.row(fmt.Sprintf("snapshot images the idle agent holds as memfds (%d; shared memory, in no RSS)", m.images.memfds), fmt.Sprintf("%.1f MiB", mib(m.images.memfdKiB)))
	r.row(fmt.Sprintf("snapshot images the idle agent holds as files (%d; page cache the kernel can reclaim)", m.images.files), fmt.Sprintf("%.1f MiB", mib(m.images.fileKiB)))
	r.busy(m.busy)
	r.row("RSS idle once each stock tool has run (their code resident)", fmt.Sprintf("%.1f MiB", mib(m.used)))
	r.row(fmt.Sprintf("RSS once the idle code is unloaded (tools.unload_after, %s here)", unloadAfter), fmt.Sprintf("%.1f MiB", mib(m.unloaded)))
	return r.err()
}

func stop(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
}

func writeRandomFile(path string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// agentRun starts aip-agent for the enrolled device, the stock tools
// loaded and the files dir allowed, on one data dir throughout.
type agentRun struct {
	bin, agent, work, files, server, token string
	client                                 *api.Client
	busyMiB                                int // the size of the file the busy calls hash
}

func (a agentRun) start() (*exec.Cmd, error) {
	tokenFile := filepath.Join(a.work, "device.token")
	if err := os.WriteFile(tokenFile, []byte(a.token), 0o600); err != nil {
		return nil, err
	}
	config := filepath.Join(a.work, "agent.yaml")
	// The defaults would run GOMAXPROCS commands' calls at once, and
	// reserve memory for four hash_file calls: let concurrentCalls run.
	yaml := fmt.Sprintf(`device: {id: footprint-1}
server: {url: %q, token_file: %q}
data_dir: %q
commands:
  max_concurrent: %d
tools:
  dirs: [%q]
  allow_dirs: [%q]
  unload_after: %s
  max_calls: %d
  max_call_memory: %d
`, "ws"+strings.TrimPrefix(a.server, "http")+"/ws", tokenFile, filepath.Join(a.work, "agent"), concurrentCalls,
		filepath.Join(a.bin, "tools"), a.files, unloadAfter, concurrentCalls, concurrentCalls*hashFileMemory)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(filepath.Join(a.work, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(a.agent, "--config", config)
	cmd.Stderr = logFile
	return cmd, cmd.Start()
}

// startRegistered starts the agent and returns once the server has it
// online, with the time that took.
func (a agentRun) startRegistered(ctx context.Context) (*exec.Cmd, time.Duration, error) {
	began := time.Now()
	cmd, err := a.start()
	if err != nil {
		return nil, 0, err
	}
	for time.Since(began) < time.Minute {
		if d, err := a.client.Device(ctx, "footprint-1"); err == nil && d.Online {
			return cmd, time.Since(began), nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	stop(cmd)
	log, _ := os.ReadFile(filepath.Join(a.work, "agent.log"))
	return nil, 0, fmt.Errorf("aip-agent did not register within a minute; its log:\n%s", log[max(0, len(log)-2000):])
}

// warmStart starts the agent, times its start to registered, and reads
// its resident memory, in KiB, once it has settled.
func (a agentRun) warmStart(ctx context.Context) (time.Duration, int64, error) {
	cmd, took, err := a.startRegistered(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer stop(cmd)
	time.Sleep(settle)
	kb, err := rssKiB(cmd.Process.Pid)
	return took, kb, err
}

// instrumentAll starts the agent, waits until it has instrumented every
// tool not yet in the cache, and returns its resident memory, in KiB, once
// that has settled.
func (a agentRun) instrumentAll(ctx context.Context) (int64, error) {
	logPath := filepath.Join(a.work, "agent.log")
	before, _ := os.ReadFile(logPath)
	cmd, err := a.start()
	if err != nil {
		return 0, err
	}
	defer stop(cmd)
	for began := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		log, _ := os.ReadFile(logPath)
		if bytes.Contains(log[min(len(before), len(log)):], []byte("tools instrumented")) {
			break
		}
		if time.Since(began) > time.Minute {
			return 0, fmt.Errorf("aip-agent did not instrument its tools within a minute; its log:\n%s", log[max(0, len(log)-2000):])
		}
	}
	time.Sleep(settle)
	return rssKiB(cmd.Process.Pid)
}

// memoryFigures are the agent's resident memory at three moments, in KiB.
type memoryFigures struct {
	images   imageHoldings // snapshot images held idle, before the calls
	busy     busyFigures   // while concurrentCalls hash_file calls run
	used     int64         // idle again, each stock tool having run once
	unloaded int64         // after unloadAfter, the tools' code freed
}

// memory measures memoryFigures on a fresh agent.
func (a agentRun) memory(ctx context.Context) (memoryFigures, error) {
	var m memoryFigures
	cmd, _, err := a.startRegistered(ctx)
	if err != nil {
		return m, err
	}
	defer stop(cmd)
	time.Sleep(settle)
	pid := cmd.Process.Pid
	if m.images, err = snapshotImages(pid); err != nil {
		return m, err
	}
	if m.busy, err = a.busy(ctx, pid); err != nil {
		return m, err
	}
	for _, tool := range []struct {
		name   string
		params map[string]any
	}{
		{"read_file", map[string]any{"path": filepath.Join(a.files, "big.bin"), "max_bytes": 1024}},
		{"write_file", map[string]any{"path": filepath.Join(a.files, "note.txt"), "content": "hello"}},
		{"list_dir", map[string]any{"path": a.files}},
	} {
		req := api.CommandRequest{Actions: []protocol.Command{{ToolName: tool.name, Parameters: tool.params}}, Timeout: "2m"}
		if resp, err := a.client.Command(ctx, "footprint-1", req); err != nil || !resp.Succeeded() {
			return m, fmt.Errorf("%s failed: %v %+v", tool.name, err, resp.Results)
		}
	}
	time.Sleep(time.Second)
	if m.used, err = rssKiB(pid); err != nil {
		return m, err
	}
	time.Sleep(unloadAfter + 3*time.Second) // the sweep runs every unloadAfter/4
	m.unloaded, err = rssKiB(pid)
	return m, err
}

// busyFigures are what busy measured.
type busyFigures struct {
	peak       int64 // resident memory, in KiB
	overlapped int   // the most calls that ran at one moment
	fileMiB    int   // the size of the file each call hashed
	// snapshots is the reading of the snapshot mappings with the most of
	// them, and of those the one with the most resident.
	snapshots snapshotMappings
}

// busy runs concurrentCalls hash_file calls at once and returns the peak
// resident memory meanwhile and how many of them the agent ran together.
func (a agentRun) busy(ctx context.Context, pid int) (busyFigures, error) {
	var wg sync.WaitGroup
	runs := make([]interval, concurrentCalls)
	errs := make([]error, concurrentCalls)
	req := api.CommandRequest{Actions: []protocol.Command{{ToolName: "hash_file", Parameters: map[string]any{"path": filepath.Join(a.files, "big.bin")}}}, Timeout: "2m"}
	began := time.Now()
	for i := range concurrentCalls {
		wg.Go(func() {
			runs[i], errs[i] = a.hashFile(ctx, req, began)
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	b := busyFigures{fileMiB: a.busyMiB}
	for {
		if kb, err := rssKiB(pid); err == nil {
			b.peak = max(b.peak, kb)
		}
		if m, err := readSnapshotMappings(pid); err == nil &&
			(m.count > b.snapshots.count || m.count == b.snapshots.count && m.rss > b.snapshots.rss) {
			b.snapshots = m
		}
		select {
		case <-done:
			b.overlapped = mostAtOnce(runs)
			return b, errors.Join(errs...)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// hashFile runs one hash_file command and returns when its call ran,
// since began: it ended about when its result came back, and ran for the
// wall time the sandbox measured, which leaves out its wait for a slot.
// The result's way back, a few milliseconds, blurs the end.
func (a agentRun) hashFile(ctx context.Context, req api.CommandRequest, began time.Time) (interval, error) {
	resp, err := a.client.Command(ctx, "footprint-1", req)
	end := time.Since(began)
	if err != nil {
		return interval{}, fmt.Errorf("hash_file: %w", err)
	}
	if !resp.Succeeded() || len(resp.Results) != 1 || resp.Results[0].Usage == nil {
		return interval{}, fmt.Errorf("hash_file failed: %+v", resp.Results)
	}
	wall := time.Duration(resp.Results[0].Usage.WallMicros) * time.Microsecond
	return interval{start: end - wall, end: end}, nil
}

// interval is when something ran.
type interval struct{ start, end time.Duration }

// mostAtOnce is the most intervals that share a moment. Each is cut short
// by a tenth of the shortest first: a call that took the slot of one that
// ended seems to overlap it by the difference of the two results' ways
// back, milliseconds against calls that take hundreds.
func mostAtOnce(runs []interval) int {
	type edge struct {
		at    time.Duration
		delta int
	}
	blur := time.Duration(math.MaxInt64)
	for _, r := range runs {
		blur = min(blur, (r.end-r.start)/10)
	}
	var edges []edge
	for _, r := range runs {
		edges = append(edges, edge{r.start, +1}, edge{r.end - blur, -1})
	}
	// An interval that ends where another starts did not overlap it.
	slices.SortFunc(edges, func(x, y edge) int { return cmp.Or(cmp.Compare(x.at, y.at), cmp.Compare(x.delta, y.delta)) })
	most, now := 0, 0
	for _, e := range edges {
		now += e.delta
		most = max(most, now)
	}
	return most
}

// rssReadings are readings of resident memory, in KiB, in no order; they
// print as their median and range.
type rssReadings []int64

func (r rssReadings) median() int64 { return median(r) }

func (r rssReadings) String() string {
	return fmt.Sprintf("%.1f MiB (%.1f-%.1f)", mib(r.median()), mib(slices.Min(r)), mib(slices.Max(r)))
}

func median[T cmp.Ordered](xs []T) T {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}

func mib(kb int64) float64 { return float64(kb) / 1024 }

var rssLine = regexp.MustCompile(`^VmRSS:\s+(\d+) kB`)

func rssKiB(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := rssLine.FindStringSubmatch(sc.Text()); m != nil {
			return strconv.ParseInt(m[1], 10, 64)
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}
