package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClusterSoak is make soak-cluster: three nodes and 15 agents under
// a steady load of commands and plans for EDGEAIP_SOAK_CLUSTER minutes,
// while every node in turn is stopped with SIGTERM (it drains: its tasks
// finish or are handed off, its devices are sent elsewhere) and started
// again, over and over. Nothing is lost, nothing runs twice.
func TestClusterSoak(t *testing.T) {
	minutes, _ := strconv.Atoi(os.Getenv("EDGEAIP_SOAK_CLUSTER"))
	if minutes <= 0 {
		t.Skip("make soak-cluster runs this (EDGEAIP_SOAK_CLUSTER=minutes)")
	}
	const nodes, agents = 3, 15
	sc := newServerCluster(t, nodes)
	files, tools := t.TempDir(), appendAndPause(t)
	lbs, devs := sc.agentsBehindProxies(t, agents, files, tools)

	stop := make(chan struct{})
	var issued, repeats atomic.Int64
	var mu sync.Mutex
	var outcomes []api.CommandResponse
	var plans []string
	var wg sync.WaitGroup
	for w := range 10 {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				i := int(issued.Add(1))
				if w == 0 && k%10 == 0 {
					if id := soakPlan(t, sc, i, devs[i%agents], files, &repeats); id != "" {
						mu.Lock()
						plans = append(plans, id)
						mu.Unlock()
					}
					continue
				}
				resp := command(t, sc, i, devs[i%agents], filepath.Join(files, fmt.Sprintf("cmd-%05d", i)), &repeats)
				mu.Lock()
				outcomes = append(outcomes, resp)
				mu.Unlock()
			}
		})
	}

	deadline, restarts := time.Now().Add(time.Duration(minutes)*time.Minute), 0
	var stopped []*serverProcess
	for n := 0; time.Now().Before(deadline); n = (n + 1) % nodes {
		next := (n + 1) % nodes
		lbs[n].retarget(sc.nodes[next].addr)
		stopped = append(stopped, sc.restartNode(n))
		lbs[n].retarget(sc.nodes[n].addr)
		restarts++
		time.Sleep(5 * time.Second)
	}
	close(stop)
	wg.Wait()
	t.Logf("%d rolling restarts, %d commands (%d repeated through another node), %d plans", restarts, len(outcomes), repeats.Load(), len(plans))
	for i, resp := range outcomes {
		if !assert.Equal(t, "success", resp.Status, "command %d: %+v", i, resp) {
			for _, p := range append(stopped, sc.nodes...) {
				for _, line := range strings.Split(p.logs.String(), "\n") {
					if strings.Contains(line, resp.ResponseID) || strings.Contains(line, resp.SessionID) {
						t.Logf("%s: %s", p.addr, line)
					}
				}
			}
		}
	}
	for _, id := range plans {
		task := waitEnded(t, sc.nodes[0].api, id)
		assert.Equal(t, api.StateCompleted, task.State, "plan %s: %s", id, task.Error)
	}
	requireRanOnce(t, files, len(outcomes)+2*len(plans))
}

// soakPlan dispatches plan i, two appends around a pause, to dev through
// a node that takes it, with an Idempotency-Key, and returns its id.
func soakPlan(t *testing.T, sc *serverCluster, i int, dev, files string, repeats *atomic.Int64) string {
	doc := fmt.Sprintf("steps: [{tool: write_file, parameters: {path: %s, content: \"ran\\n\", append: true}}, "+
		"{tool: pause, parameters: {ms: 2000}}, {tool: write_file, parameters: {path: %s, content: \"ran\\n\", append: true}}]",
		filepath.Join(files, fmt.Sprintf("plan-%05d-a", i)), filepath.Join(files, fmt.Sprintf("plan-%05d-b", i)))
	var d api.DispatchResponse
	err := throughAnyNode(sc, i, repeats, func(node *serverProcess) (err error) {
		d, err = node.api.Dispatch(context.Background(), api.DispatchRequest{ClientID: dev, Request: doc, IdempotencyKey: fmt.Sprintf("plan-%05d", i)})
		return err
	})
	if err != nil {
		t.Errorf("plan %d: %v", i, err)
	}
	return d.SessionID
}

// restartNode stops node n with SIGTERM, which drains it, and starts it
// again, the same node id on the same data dir; it returns the stopped
// process.
func (sc *serverCluster) restartNode(n int) *serverProcess {
	sc.t.Helper()
	old := sc.nodes[n]
	require.NoError(sc.t, old.cmd.Process.Signal(syscall.SIGTERM))
	err := old.cmd.Wait()
	<-old.done
	require.NoError(sc.t, err, "node-%d stopped on SIGTERM: %s", n, old.logs.String())
	data := old.cmd.Args[4] // --listen ADDR --data DIR
	sc.nodes[n] = startServerProcess(sc.t, sc.bin, old.addr, data, old.cmd.Args[5:]...)
	return old
}
