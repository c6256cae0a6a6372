// Command mcpflood measures what MCP sessions cost an MCP endpoint's
// memory, on loopback only: it starts aip-server (-server) afresh with a
// temporary data dir, and an aip-agent (-agent) linked to it with its own
// MCP endpoint, then sends each endpoint -n initializes (revision
// 2025-11-25, never ending a session, as a client that goes away or a
// hostile one) from one token, -c at a time, and prints the process's
// RSS before and after, from /proc. Bounded by -n; Linux only.
//
//	go run ./scripts/mcpflood -server /tmp/aip-server -agent /tmp/aip-agent -n 20000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgeaip/edgeaip/scripts/internal/aipserver"
	"github.com/edgeaip/edgeaip/server/api"
)

func main() {
	serverBin := flag.String("server", "", "aip-server `binary`")
	agentBin := flag.String("agent", "", "aip-agent `binary` (none: the server only)")
	n := flag.Int("n", 20000, "initializes sent to each endpoint")
	c := flag.Int("c", 8, "initializes in flight at once")
	flag.Parse()
	if *serverBin == "" {
		fmt.Fprintln(os.Stderr, "mcpflood: give -server")
		os.Exit(2)
	}
	if err := run(context.Background(), *serverBin, *agentBin, *n, *c); err != nil {
		fmt.Fprintln(os.Stderr, "mcpflood:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, serverBin, agentBin string, n, c int) error {
	dir, err := os.MkdirTemp("", "mcpflood")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := aipserver.Start(ctx, serverBin, filepath.Join(dir, "server"))
	if err != nil {
		return err
	}
	defer srv.Stop()
	if err := flood("aip-server", srv.Cmd.Process.Pid, "http://"+srv.Addr+"/mcp", srv.API.Token, n, c); err != nil {
		return err
	}
	if agentBin == "" {
		return nil
	}
	agent, url, token, err := startAgent(ctx, agentBin, srv, filepath.Join(dir, "agent"))
	if err != nil {
		return err
	}
	defer func() {
		agent.Process.Signal(syscall.SIGTERM)
		agent.Wait()
	}()
	return flood("aip-agent", agent.Process.Pid, url, token, n, c)
}

// startAgent enrolls a device with srv and runs binary as it, with its
// MCP endpoint on a free loopback port, and returns the endpoint's URL
// and token once it has made the token.
func startAgent(ctx context.Context, binary string, srv *aipserver.Process, data string) (*exec.Cmd, string, string, error) {
	enrolled, err := srv.API.Enroll(ctx, api.EnrollRequest{ID: "flood-1"})
	if err != nil {
		return nil, "", "", err
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, "", "", err
	}
	tokenFile := filepath.Join(data, "device.token")
	if err := os.WriteFile(tokenFile, []byte(enrolled.Token), 0o600); err != nil {
		return nil, "", "", err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", "", err
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(binary, "--id", "flood-1", "--server", "ws://"+srv.Addr+"/ws", "--token-file", tokenFile,
		"--data", data, "--mcp-listen", addr)
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, "", "", fmt.Errorf("start %s: %w", binary, err)
	}
	for range 1000 {
		if b, err := os.ReadFile(filepath.Join(data, "mcp-serve.token")); err == nil && len(b) > 0 {
			if conn, err := net.Dial("tcp", addr); err == nil {
				conn.Close()
				return cmd, "http://" + addr + "/mcp", strings.TrimSpace(string(b)), nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Kill()
	return nil, "", "", fmt.Errorf("%s did not serve MCP on %s", binary, addr)
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcpflood","version":"1"}}}`

// flood sends n initializes to url as token, c at a time, and prints
// pid's RSS before and after, with the answers' statuses.
func flood(name string, pid int, url, token string, n, c int) error {
	before, err := rss(pid)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c}}
	var next atomic.Int64
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				status := initializeOnce(client, url, token)
				mu.Lock()
				statuses[status]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	after, err := rss(pid)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d initializes in %.1f s, answers %v: RSS %.1f MB before, %.1f MB after (%+.1f MB)\n",
		name, n, took.Seconds(), statuses, mb(before), mb(after), mb(after-before))
	return nil
}

// initializeOnce sends one initialize and returns its status (0: no
// answer).
func initializeOnce(client *http.Client, url, token string) int {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(initialize))
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

var rssLine = regexp.MustCompile(`(?m)^VmRSS:\s+(\d+) kB`)

// rss is pid's resident set, in bytes.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	m := rssLine.FindSubmatch(b)
	if m == nil {
		return 0, errors.New("no VmRSS in /proc status")
	}
	kb, err := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10, err
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }
