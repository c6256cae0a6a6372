// Command footprint measures what the agent costs a board: the size of its
// binaries (from `make cross`), the time from start to registered, its
// resident memory once registered with the stock tools loaded, and its
// resident memory while 8 tool calls run at once. `make footprint` runs it
// and BENCHMARKS.md records what it printed.
//
// It runs the real aip-server and aip-agent of BIN on loopback, each in a
// temporary directory, and reads the agent's memory from /proc (Linux).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
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
	"github.com/edgeaip/edgeaip/server/api"
)

// concurrentCalls is how many tool calls run at once for the busy figure.
const concurrentCalls = 8

// unloadAfter is the agent's tools.unload_after here: short, so that the
// figure after unloading takes seconds to measure, not minutes.
const unloadAfter = 5 * time.Second

func main() {
	bin := flag.String("bin", "bin", "directory of aip-server and tools/, and cross/ from make cross")
	agentBin := flag.String("agent", "", "the agent to measure (default BIN/cross/aip-agent-linux-GOARCH, as shipped)")
	runs := flag.Int("runs", 5, "warm starts to time; the median is reported")
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
	if err := run(*bin, *agentBin, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "footprint:", err)
		os.Exit(1)
	}
}

func run(bin, agentBin string, runs int) error {
	work, err := os.MkdirTemp("", "edgeaip-footprint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	ctx := context.Background()

	srv, client, err := startServer(bin, work)
	if err != nil {
		return err
	}
	defer stop(srv)
	token, err := client.Enroll(ctx, api.EnrollRequest{ID: "footprint-1"})
	if err != nil {
		return err
	}
	files := filepath.Join(work, "files")
	if err := writeRandomFile(filepath.Join(files, "big.bin"), 32<<20); err != nil {
		return err
	}
	a := agentRun{bin: bin, agent: agentBin, work: work, files: files, server: client.BaseURL, token: token.Token, client: client}

	fmt.Println("## Agent footprint (make footprint)")
	fmt.Println()
	printSizes(filepath.Join(bin, "cross"))

	cold, err := a.startToRegistered(ctx)
	if err != nil {
		return err
	}
	// The first start stopped once registered; let one run to the end of
	// instrumenting, as a board's first start does, so that the starts
	// measured next find every tool in the cache.
	firstIdle, err := a.instrumentAll(ctx)
	if err != nil {
		return err
	}
	var warm []time.Duration
	for range runs {
		d, err := a.startToRegistered(ctx)
		if err != nil {
			return err
		}
		warm = append(warm, d)
	}
	m, err := a.memory(ctx)
	if err != nil {
		return err
	}
	slices.Sort(warm)
	fmt.Printf("| start to registered, compile cache warm (median of %d) | %s |\n", runs, warm[len(warm)/2].Round(time.Millisecond))
	fmt.Printf("| start to registered, first start on a fresh data dir (tools instrumented in the background) | %s |\n", cold.Round(time.Millisecond))
	fmt.Printf("| RSS idle after registration, stock tools loaded | %.1f MiB |\n", mib(m.idle))
	fmt.Printf("| RSS idle after a first start has instrumented the tools in the background | %.1f MiB |\n", mib(firstIdle))
	fmt.Printf("| RSS peak during %d concurrent hash_file calls (32 MiB file) | %.1f MiB |\n", concurrentCalls, mib(m.busy))
	fmt.Printf("| RSS idle once each stock tool has run (their code resident) | %.1f MiB |\n", mib(m.used))
	fmt.Printf("| RSS once the idle code is unloaded (tools.unload_after, %s here) | %.1f MiB |\n", unloadAfter, mib(m.unloaded))
	return nil
}

func mib(kb int64) float64 { return float64(kb) / 1024 }

// printSizes lists the agent binaries make cross built.
func printSizes(dir string) {
	fmt.Println("| what | figure |")
	fmt.Println("|---|---|")
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && strings.HasPrefix(e.Name(), "aip-agent-") {
			fmt.Printf("| %s (static, stripped) | %.1f MB |\n", e.Name(), float64(fi.Size())/1e6)
		}
	}
}

// startServer runs aip-server on a free loopback port.
func startServer(bin, work string) (*exec.Cmd, *api.Client, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	data := filepath.Join(work, "server")
	cmd := exec.Command(filepath.Join(bin, "aip-server"), "--listen", addr, "--data", data)
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	client := &api.Client{BaseURL: "http://" + addr}
	for range 500 {
		if b, err := os.ReadFile(filepath.Join(data, "admin.token")); err == nil && len(b) > 0 {
			client.Token = strings.TrimSpace(string(b))
			if _, err := client.Devices(context.Background()); err == nil {
				return cmd, client, nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop(cmd)
	return nil, nil, errors.New("aip-server did not come up")
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
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
}

func (a agentRun) start() (*exec.Cmd, error) {
	tokenFile := filepath.Join(a.work, "device.token")
	if err := os.WriteFile(tokenFile, []byte(a.token), 0o600); err != nil {
		return nil, err
	}
	config := filepath.Join(a.work, "agent.yaml")
	yaml := fmt.Sprintf(`device: {id: footprint-1}
server: {url: %q, token_file: %q}
data_dir: %q
tools:
  dirs: [%q]
  allow_dirs: [%q]
  unload_after: %s
`, "ws"+strings.TrimPrefix(a.server, "http")+"/ws", tokenFile, filepath.Join(a.work, "agent"),
		filepath.Join(a.bin, "tools"), a.files, unloadAfter)
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

// startToRegistered starts the agent, waits until the server has it
// online, and stops it again.
func (a agentRun) startToRegistered(ctx context.Context) (time.Duration, error) {
	began := time.Now()
	cmd, err := a.start()
	if err != nil {
		return 0, err
	}
	for time.Since(began) < time.Minute {
		if d, err := a.client.Device(ctx, "footprint-1"); err == nil && d.Online {
			took := time.Since(began)
			stop(cmd)
			return took, nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	stop(cmd)
	log, _ := os.ReadFile(filepath.Join(a.work, "agent.log"))
	return 0, fmt.Errorf("aip-agent did not register within a minute; its log:\n%s", log[max(0, len(log)-2000):])
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
	time.Sleep(3 * time.Second) // let it settle, as memory does
	return rssKiB(cmd.Process.Pid)
}

// memoryFigures are the agent's resident memory at four moments, in KiB.
type memoryFigures struct {
	idle     int64 // registered, no tool run yet
	busy     int64 // peak while concurrentCalls hash_file calls run
	used     int64 // idle again, each stock tool having run once
	unloaded int64 // after unloadAfter, the tools' code freed
}

// memory measures memoryFigures on a fresh agent.
func (a agentRun) memory(ctx context.Context) (memoryFigures, error) {
	var m memoryFigures
	cmd, err := a.start()
	if err != nil {
		return m, err
	}
	defer stop(cmd)
	for {
		if d, err := a.client.Device(ctx, "footprint-1"); err == nil && d.Online {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // let start-up settle
	pid := cmd.Process.Pid
	if m.idle, err = rssKiB(pid); err != nil {
		return m, err
	}
	if m.busy, err = a.busy(ctx, pid, m.idle); err != nil {
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

// busy runs concurrentCalls hash_file calls at once and returns the peak
// resident memory meanwhile, in KiB.
func (a agentRun) busy(ctx context.Context, pid int, idle int64) (int64, error) {
	var wg sync.WaitGroup
	errs := make(chan error, concurrentCalls)
	req := api.CommandRequest{Actions: []protocol.Command{{ToolName: "hash_file", Parameters: map[string]any{"path": filepath.Join(a.files, "big.bin")}}}, Timeout: "2m"}
	for range concurrentCalls {
		wg.Go(func() {
			resp, err := a.client.Command(ctx, "footprint-1", req)
			if err == nil && !resp.Succeeded() {
				err = fmt.Errorf("hash_file failed: %+v", resp.Results)
			}
			errs <- err
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for busy := idle; ; time.Sleep(5 * time.Millisecond) {
		if kb, err := rssKiB(pid); err == nil {
			busy = max(busy, kb)
		}
		select {
		case <-done:
			close(errs)
			for err := range errs {
				if err != nil {
					return 0, err
				}
			}
			return busy, nil
		default:
		}
	}
}

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
