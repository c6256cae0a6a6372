package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serverCluster is aip-server nodes as processes, sharing one PostgreSQL
// database and one NATS server (natsd, a process of its own), and the
// first node's operator token. Tests of cluster mode start one with
// newServerCluster and add nodes and agents.
type serverCluster struct {
	t     testing.TB
	bin   string
	nats  string // URL
	store string
	token []byte
	nodes []*serverProcess
}

// newServerCluster starts NATS and a database, and n nodes, node-0 …
func newServerCluster(t testing.TB, n int) *serverCluster {
	t.Helper()
	sc := &serverCluster{t: t, bin: testenv.Command(t, "aip-server"), nats: startNATS(t),
		store: pgtest.Shared(t).NewDatabase(t)}
	for i := range n {
		sc.startNode(fmt.Sprintf("node-%d", i))
	}
	return sc
}

// startNATS runs natsd on a free port until t ends, and returns its URL.
func startNATS(t testing.TB) string {
	t.Helper()
	cmd := exec.Command(testenv.Command(t, "internal/natstest/natsd"), "-port", "0")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "natsd did not say where it listens")
	return strings.TrimSpace(line)
}

// startNode starts node id, with more flags in args, and adds it to the
// cluster's nodes.
func (sc *serverCluster) startNode(id string, args ...string) *serverProcess {
	sc.t.Helper()
	data := sc.t.TempDir()
	if sc.token != nil {
		require.NoError(sc.t, os.WriteFile(filepath.Join(data, "admin.token"), sc.token, 0o600))
	}
	p := startServerProcess(sc.t, sc.bin, "127.0.0.1:0", data,
		append([]string{"--store", sc.store, "--nats", sc.nats, "--node-id", id, "--device-grace", "30s"}, args...)...)
	if sc.token == nil {
		tok, err := os.ReadFile(filepath.Join(data, "admin.token"))
		require.NoError(sc.t, err)
		sc.token = tok
	}
	sc.nodes = append(sc.nodes, p)
	return p
}

// agentOn starts agent id on node, its token enrolled through the first
// node, with files as its allowed dir, and dataDir as its own (its
// outbox).
func (sc *serverCluster) agentOn(node *serverProcess, id, tokenFile, dataDir, files string) *agentProcess {
	sc.t.Helper()
	p := newAgentProcess(sc.t, agentYAML(sc.t, id, node.wsURL(), tokenFile, dataDir, files))
	p.start()
	return p
}

// waitLinked waits until node's /api/cluster shows device id held by
// holder, alive.
func (sc *serverCluster) waitLinked(node *serverProcess, id, holder string) {
	sc.t.Helper()
	require.Eventually(sc.t, func() bool {
		var view api.Cluster
		if node.api.Do(context.Background(), "GET", "/api/cluster", nil, &view) != nil {
			return false
		}
		for _, l := range view.Leases {
			if l.DeviceID == id {
				return l.NodeID == holder && l.HolderAlive
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "device %s never linked to %s", id, holder)
}

// appendOnce is a command that appends a line to path: run twice, the
// file says so.
func appendOnce(path string) api.CommandRequest {
	return api.CommandRequest{Timeout: "30s", Actions: []protocol.Command{
		{ToolName: "write_file", Parameters: map[string]any{"path": path, "content": "ran\n", "append": true}}}}
}

// Three nodes, an agent on each; commands through every node to every
// device run once each. Then the node of one device is killed with a
// command out to it, and the device comes back on another node: the
// command is carried there with its response_id, and runs once.
func TestCommandsThroughEveryNodeReachDevicesOnEveryNodeOnce(t *testing.T) {
	sc := newServerCluster(t, 3)
	files := t.TempDir()
	tokens, dirs, agents := make([]string, 3), make([]string, 3), make([]*agentProcess, 3)
	for i, node := range sc.nodes {
		id := fmt.Sprintf("dev-%d", i)
		tokens[i], dirs[i] = sc.nodes[0].enroll(t, id), t.TempDir()
		agents[i] = sc.agentOn(node, id, tokens[i], dirs[i], files)
	}
	for i := range sc.nodes {
		sc.waitLinked(sc.nodes[0], fmt.Sprintf("dev-%d", i), fmt.Sprintf("node-%d", i))
	}

	const each = 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := map[string]string{}
	start := time.Now()
	for n, node := range sc.nodes {
		for d := range sc.nodes {
			for k := range each {
				path := filepath.Join(files, fmt.Sprintf("via-%d-dev-%d-%d", n, d, k))
				wg.Go(func() {
					resp, err := node.api.Command(context.Background(), fmt.Sprintf("dev-%d", d), appendOnce(path))
					if err != nil || resp.Status != "success" {
						mu.Lock()
						failed[path] = fmt.Sprintf("%v %+v", err, resp)
						mu.Unlock()
					}
				})
			}
		}
	}
	wg.Wait()
	t.Logf("%d commands through 3 nodes to 3 devices in %s", 3*3*each, time.Since(start).Round(time.Millisecond))
	require.Empty(t, failed)
	requireRanOnce(t, files, 3*3*each)

	// A command through node-0 to dev-2, on node-2, which is killed; dev-2
	// comes back on node-1: its agent, stopped once it has finished the
	// command (its results in its outbox), is started again with node-1's
	// URL and the same data dir.
	slow := api.CommandRequest{Timeout: "40s", Actions: []protocol.Command{
		{ToolName: "pause", Parameters: map[string]any{"ms": 1500}},
		{ToolName: "write_file", Parameters: map[string]any{"path": filepath.Join(files, "moved"), "content": "ran\n", "append": true}}}}
	out := make(chan api.CommandResponse, 1)
	received := agents[2].count("command received")
	go func() {
		resp, err := sc.nodes[0].api.Command(context.Background(), "dev-2", slow)
		assert.NoError(t, err)
		out <- resp
	}()
	require.Eventually(t, func() bool { return agents[2].count("command received") > received },
		30*time.Second, 10*time.Millisecond, "the command never reached dev-2")
	sc.nodes[2].kill(t)
	agents[2].term() // its server is gone: its exit status says so
	sc.agentOn(sc.nodes[1], "dev-2", tokens[2], dirs[2], files)
	sc.waitLinked(sc.nodes[0], "dev-2", "node-1")
	resp := <-out
	require.Equal(t, "success", resp.Status, "%+v", resp)
	requireRanOnce(t, files, 3*3*each+1)
}

// requireRanOnce requires n files in dir, each with one line: each
// command ran once.
func requireRanOnce(t *testing.T, dir string, n int) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, n)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		assert.Equal(t, "ran\n", string(b), "%s ran %d times", e.Name(), strings.Count(string(b), "ran"))
	}
}

// A node paused (SIGSTOP) for longer than a node may be silent is taken
// as dead. Resumed, it does not take the work that was waiting for it
// (a request that came during the pause): it answers 503 naming its
// lease, rather than record a task that another node may run too. Then
// it rejoins the cluster at a new epoch by itself and serves again.
func TestAPausedNodeTakesNoWorkOnResumingAndRejoins(t *testing.T) {
	sc := newServerCluster(t, 2)
	files := t.TempDir()
	token := sc.nodes[0].enroll(t, "dev-1")
	sc.agentOn(sc.nodes[1], "dev-1", token, t.TempDir(), files)
	sc.waitLinked(sc.nodes[0], "dev-1", "node-1")
	paused := sc.nodes[0]

	require.NoError(t, paused.cmd.Process.Signal(syscall.SIGSTOP))
	require.Eventually(t, func() bool { return nodeState(sc.nodes[1], "node-0") == "gone" }, 60*time.Second, 50*time.Millisecond,
		"the paused node is taken as dead")
	answer := make(chan error, 1)
	go func() {
		_, err := paused.api.Command(context.Background(), "dev-1", appendOnce(filepath.Join(files, "while-paused")))
		answer <- err
	}()
	require.NoError(t, paused.cmd.Process.Signal(syscall.SIGCONT))
	var refused *api.StatusError
	require.ErrorAs(t, <-answer, &refused)
	assert.Equal(t, http.StatusServiceUnavailable, refused.Code)
	assert.Contains(t, refused.Message, `new work refused: cluster: node "node-0"`)

	require.Eventually(t, func() bool { return nodeState(sc.nodes[1], "node-0") == "up" }, 60*time.Second, 50*time.Millisecond,
		"it rejoins by itself")
	resp, err := paused.api.Command(context.Background(), "dev-1", appendOnce(filepath.Join(files, "after")))
	require.NoError(t, err)
	require.Equal(t, "success", resp.Status, "%+v", resp)
	requireRanOnce(t, files, 1) // "after" alone: the refused command never ran
}

// nodeState is node id's state as via's /api/cluster shows it, or "".
func nodeState(via *serverProcess, id string) string {
	var view api.Cluster
	if via.api.Do(context.Background(), "GET", "/api/cluster", nil, &view) != nil {
		return ""
	}
	for _, n := range view.Nodes {
		if n.ID == id {
			return n.State
		}
	}
	return ""
}
