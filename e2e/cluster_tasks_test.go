package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// appendAndPause is a tools dir with the stock write_file and the pause
// fixture alone: 30 agents load it in moments, where loading every stock
// tool and fixture took each a few seconds of a busy machine.
func appendAndPause(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for src, name := range map[string]string{
		filepath.Join(testenv.StockToolsDir(t), "write_file.wasm"): "write_file.wasm",
		filepath.Join(testenv.TestdataTools(), "pause.wasm"):       "pause.wasm",
		filepath.Join(testenv.TestdataTools(), "pause.json"):       "pause.json",
	} {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	return dir
}

// agentsBehindProxies starts n agents, dev-00 onwards, each linked to a
// node through a proxy that stands for a load balancer (one per node,
// in turn), and waits until each is linked where it was sent and its
// tools are ready. The first agent's tools are ready before the others
// start, which then load them from the compile cache it filled: on a
// fresh cache under load, 30 agents compiling write_file at once (then a
// Go module) took longer than a step's 30 s timeout, and the first plans
// failed waiting for it.
func (sc *serverCluster) agentsBehindProxies(t *testing.T, n int, files, tools string) (lbs []*cutProxy, devs []string) {
	lbs = make([]*cutProxy, len(sc.nodes))
	for i, node := range sc.nodes {
		lbs[i] = newCutProxy(t, node.addr)
	}
	devs = make([]string, n)
	ready := make([]chan struct{}, n)
	deadline := time.After(time.Minute)
	for i := range devs {
		devs[i], ready[i] = fmt.Sprintf("dev-%02d", i), make(chan struct{})
		sc.agentIn(lbs[i%len(lbs)], devs[i], sc.nodes[0].enroll(t, devs[i]), files, tools, ready[i])
		if i == 0 {
			waitToolsReady(t, devs[i], ready[i], deadline)
		}
	}
	for i := range devs {
		sc.waitLinked(sc.nodes[0], devs[i], fmt.Sprintf("node-%d", i%len(lbs)))
		waitToolsReady(t, devs[i], ready[i], deadline)
	}
	return lbs, devs
}

// waitToolsReady waits until ready, which agent dev closes once its
// tools are, is closed; if deadline comes first, the test fails.
func waitToolsReady(t *testing.T, dev string, ready <-chan struct{}, deadline <-chan time.Time) {
	t.Helper()
	select {
	case <-ready:
	case <-deadline:
		t.Fatalf("%s's tools were not ready within a minute", dev)
	}
}

// agentIn starts an in-process agent for device id linked to its node
// through lb, as through a load balancer (which, when that node dies,
// sends the agent's next link to another), with tools, and files mounted
// as itself; it closes ready once its tools are.
func (sc *serverCluster) agentIn(lb *cutProxy, id, token, files, tools string, ready chan<- struct{}) {
	sc.t.Helper()
	cfg := agent.Config{
		ID: id, ServerURL: "ws://" + lb.addr() + "/ws", TokenFile: token, DataDir: sc.t.TempDir(),
		ToolDirs: []string{"stock=" + tools}, CompileCacheDir: sharedCompileCache(sc.t),
		Mounts:        []sandbox.Mount{{HostPath: files, GuestPath: files}},
		ShutdownGrace: 500 * time.Millisecond, Logger: testLogger(),
	}
	whenLogged("tools instrumented", ready)(&cfg)
	runAgent(sc.t, cfg)
}

// Three nodes, 30 agents over them; 600 commands and 20 plans through
// every node to devices on every node. One node is killed (kill -9) in
// the middle: its devices move to the others, its plans are adopted by a
// survivor and finish there, and a command whose caller lost its node is
// repeated through another with its Idempotency-Key and gets its
// outcome. Every command and every step ran exactly once (each appends a
// line to a file of its own), and a stream of each plan's events on a
// surviving node saw every event, across the adoption.
func TestAKilledNodeLosesNoTaskAndRunsNothingTwice(t *testing.T) {
	const nodes, agents, commands, plans = 3, 30, 600, 20
	begin := time.Now()
	sc := newServerCluster(t, nodes)
	files, tools := t.TempDir(), appendAndPause(t)
	ctx := context.Background()
	lbs, devs := sc.agentsBehindProxies(t, agents, files, tools)
	t.Logf("%d nodes and %d agents up in %s", nodes, agents, time.Since(begin).Round(time.Millisecond))
	doomed := sc.nodes[nodes-1]
	survivors := sc.nodes[:nodes-1]
	start := time.Now()

	// The plans, each five steps on its own device, three of which
	// append: they run for a few seconds each, through the kill.
	planIDs := make([]string, plans)
	streams := make([]chan []api.TaskEvent, plans)
	for j := range plans {
		dev := devs[(j*7)%agents]
		step := func(k int) string {
			return fmt.Sprintf("{tool: write_file, timeout: 30s, parameters: {path: %s, content: \"ran\\n\", append: true}}",
				filepath.Join(files, fmt.Sprintf("plan-%02d-step-%d", j, k)))
		}
		pause := "{tool: pause, timeout: 30s, parameters: {ms: 4000}}"
		d, err := sc.nodes[j%nodes].api.Dispatch(ctx, api.DispatchRequest{ClientID: dev,
			Request: "steps: [" + strings.Join([]string{step(0), pause, step(1), pause, step(2)}, ", ") + "]"})
		require.NoError(t, err)
		planIDs[j] = d.SessionID
		streams[j] = make(chan []api.TaskEvent, 1)
		go func() {
			var seen []api.TaskEvent
			err := sc.nodes[0].api.Events(ctx, d.SessionID, func(e api.TaskEvent) error { seen = append(seen, e); return nil })
			assert.NoError(t, err, "events of plan %d", j)
			streams[j] <- seen
		}()
	}

	// The commands, 30 at a time, each through node i%3 to a device on
	// any node, with an Idempotency-Key: a caller whose node dies repeats
	// it through the next node.
	var done, repeats atomic.Int64
	outcomes := make([]api.CommandResponse, commands)
	var wg sync.WaitGroup
	work := make(chan int)
	for range 30 {
		wg.Go(func() {
			for i := range work {
				outcomes[i] = command(t, sc, i, devs[(i*11)%agents], filepath.Join(files, fmt.Sprintf("cmd-%03d", i)), &repeats)
				done.Add(1)
			}
		})
	}
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for done.Load() < commands/3 {
			time.Sleep(5 * time.Millisecond)
		}
		running := 0
		for j := nodes - 1; j < plans; j += nodes {
			if task, err := survivors[0].api.Task(ctx, planIDs[j]); err == nil && !task.State.Ended() {
				running++
			}
		}
		doomed.kill(t)
		t.Logf("killed node-%d after %d commands, %s, with %d of its plans running", nodes-1, done.Load(),
			time.Since(start).Round(time.Millisecond), running)
		assert.NotZero(t, running, "the node was killed with plans of its own running")
		// Its agents, whose links just dropped, reconnect to a survivor.
		lbs[nodes-1].retarget(survivors[0].addr)
	}()
	for i := range commands {
		work <- i
	}
	close(work)
	wg.Wait()
	<-killed
	t.Logf("%d commands in %s", commands, time.Since(start).Round(time.Millisecond))

	for i, resp := range outcomes {
		assert.Equal(t, "success", resp.Status, "command %d: %+v", i, resp)
	}
	for j, id := range planIDs {
		task := waitEnded(t, survivors[0].api, id)
		assert.Equal(t, api.StateCompleted, task.State, "plan %d: %s", j, task.Error)
		// A step whose tool the device prepares has preparing events too,
		// as many as the stages it was seen at.
		events := slices.DeleteFunc(<-streams[j], func(e api.TaskEvent) bool { return e.Type == api.EventPreparing })
		require.NotEmpty(t, events, "plan %d", j)
		assert.Len(t, events, 11, "plan %d: five steps' starts and ends, and its end: %v", j, eventTypes(events))
		assert.Equal(t, api.EventEnd, events[len(events)-1].Type)
		assert.Equal(t, api.StateCompleted, events[len(events)-1].State)
	}
	requireRanOnce(t, files, commands+3*plans)
	adopted := 0
	for _, n := range survivors {
		adopted += strings.Count(n.logs.String(), "adopted the sessions of a node that died")
	}
	assert.NotZero(t, adopted, "a survivor adopted the killed node's tasks")
	t.Logf("%d commands repeated through another node with their Idempotency-Key", repeats.Load())
	t.Logf("all done in %s", time.Since(start).Round(time.Millisecond))
}

// command runs command i on device dev through node i%3, appending to
// path, with an Idempotency-Key; a caller whose node is unreachable or
// refuses it (503: draining) repeats it through the next node, with the
// same key, and counts the repeat in repeats.
func command(t *testing.T, sc *serverCluster, i int, dev, path string, repeats *atomic.Int64) api.CommandResponse {
	req := appendOnce(path)
	req.IdempotencyKey = fmt.Sprintf("cmd-%05d", i)
	var resp api.CommandResponse
	err := throughAnyNode(sc, i, repeats, func(node *serverProcess) (err error) {
		resp, err = node.api.Command(context.Background(), dev, req)
		return err
	})
	if err != nil {
		t.Errorf("command %d: %v", i, err)
	}
	return resp
}

// throughAnyNode calls call with node i%n, then, while it fails as a
// node that is away or draining does, with the next ones, for up to
// about 20 s, counting each repeat in repeats.
func throughAnyNode(sc *serverCluster, i int, repeats *atomic.Int64, call func(*serverProcess) error) error {
	var err error
	for try := range 40 {
		if try > 0 {
			repeats.Add(1)
			time.Sleep(min(time.Duration(try)*50*time.Millisecond, 500*time.Millisecond))
		}
		if err = call(sc.nodes[(i+try)%len(sc.nodes)]); err == nil {
			return nil
		}
		// 503: a node draining; 404 "Client not online": UFO's dispatch
		// on a node the device is not linked to, while it moves.
		var se *api.StatusError
		if errors.As(err, &se) && se.Code != http.StatusServiceUnavailable && !strings.Contains(se.Message, "Client not online") {
			return err
		}
	}
	return err
}

func eventTypes(events []api.TaskEvent) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Type
	}
	return out
}
