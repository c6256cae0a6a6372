package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
)

// rolloutConfig is what the rollout mode runs.
type rolloutConfig struct {
	devices int
	// deploys are the devices a module is deployed to by hand, one
	// POST /api/devices/{id}/tools each, to compare the CPU of each.
	deploys, callers int
	module           string // a tool module, with its manifest
}

// rolloutRun is what one run measured.
type rolloutRun struct {
	devices int
	// wall is from the measured apply until every device reported the
	// revision; cpu is the server's over it.
	wall, cpu  time.Duration
	deploys    int
	deployCPU  time.Duration
	deployWall time.Duration
	// first is the first revision's time, unmeasured otherwise.
	first time.Duration
}

func (r rolloutRun) cpuPerDevice() time.Duration { return r.cpu / time.Duration(max(r.devices, 1)) }
func (r rolloutRun) cpuPerDeploy() time.Duration {
	return r.deployCPU / time.Duration(max(r.deploys, 1))
}

// runRollout starts bin's nodes with cfg.devices simulated devices that
// keep modules and apply revisions as the agent does, labelled
// site=lobby, and rolls out a first revision of cfg.module, then,
// measured, a second revision of another version of it: the time until
// every device reported it, and the server's CPU. Then it deploys a
// third version by hand to cfg.deploys of the devices, cfg.callers at
// once, and measures the server's CPU per deploy, on the same server.
func runRollout(ctx context.Context, bin serverBin, work string, cc clusterConfig, cfg rolloutConfig) (rolloutRun, error) {
	mods, err := moduleVersions(cfg.module, 3)
	if err != nil {
		return rolloutRun{}, err
	}
	f, tokens, err := startFleet(ctx, bin, work, cc, cfg.devices)
	if err != nil {
		return rolloutRun{}, err
	}
	defer f.stop()
	s := f.nodes[0]
	if err := labelAll(ctx, s.API, cfg.devices); err != nil {
		return rolloutRun{}, err
	}
	dctx, stopDevices := context.WithCancel(ctx)
	var devices sync.WaitGroup
	defer devices.Wait()
	defer stopDevices()
	fleetState := &revisionCounter{want: cfg.devices, at: map[int]int{}, done: map[int]chan struct{}{}}
	for i, token := range tokens {
		d, err := dialRolloutDevice(dctx, f.nodes[i%len(f.nodes)].wsURL(), deviceID(i), token, fleetState)
		if err != nil {
			return rolloutRun{}, err
		}
		devices.Go(func() { d.answer(dctx) })
	}
	run := rolloutRun{devices: cfg.devices}
	start := time.Now()
	if err := rollOut(ctx, s.API, mods[0], 1, fleetState); err != nil {
		return run, fmt.Errorf("first revision: %w", err)
	}
	run.first = time.Since(start)
	cpu0, err := f.cpu()
	if err != nil {
		return run, err
	}
	start = time.Now()
	if err := rollOut(ctx, s.API, mods[1], 2, fleetState); err != nil {
		return run, fmt.Errorf("second revision: %w", err)
	}
	run.wall = time.Since(start)
	cpu1, err := f.cpu()
	if err != nil {
		return run, err
	}
	run.cpu = cpu1 - cpu0
	run.deploys = min(cfg.deploys, cfg.devices)
	start = time.Now()
	if err := deployAll(ctx, s.API, mods[2], run.deploys, cfg.callers); err != nil {
		return run, err
	}
	run.deployWall = time.Since(start)
	cpu2, err := f.cpu()
	if err != nil {
		return run, err
	}
	run.deployCPU = cpu2 - cpu1
	return run, nil
}

// moduleVersions are n modules of the tool in path, each its manifest
// with another version: modules of the same size, of n digests. The last
// is a tool of another name, which no rollout owns, to deploy by hand.
func moduleVersions(path string, n int) ([][]byte, error) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	mod, err := manifest.FromWasm(wasm)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make([][]byte, n)
	for i := range out {
		mod.Manifest.Version = fmt.Sprintf("loadgen.%d", i+1)
		if i == n-1 {
			mod.Manifest.Name += "_by_hand"
		}
		if out[i], err = manifest.Embed(mod.Wasm, mod.Manifest); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// labelAll labels devices 0 to n-1 site=lobby, a few at a time.
func labelAll(ctx context.Context, c *api.Client, n int) error {
	return eachDevice(n, 16, func(i int) error {
		_, err := c.Label(ctx, deviceID(i), api.LabelRequest{Set: map[string]string{"site": "lobby"}})
		return err
	})
}

// deployAll deploys wasm by hand to devices 0 to n-1, callers at once.
func deployAll(ctx context.Context, c *api.Client, wasm []byte, n, callers int) error {
	return eachDevice(n, callers, func(i int) error {
		resp, err := c.DeployTool(ctx, deviceID(i), wasm, "", time.Minute)
		if err == nil && !resp.Succeeded() {
			err = fmt.Errorf("deploy to %s: %+v", deviceID(i), resp.Results)
		}
		return err
	})
}

// eachDevice runs fn for devices 0 to n-1, at most at once at a time.
func eachDevice(n, atOnce int, fn func(i int) error) error {
	errs := make(chan error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(atOnce, 1) {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return errors.Join(collectErrs(errs)...)
}

// rollOut uploads wasm and applies it as rollout "bench"'s revision rev
// to site=lobby, then waits until every device reported that revision.
func rollOut(ctx context.Context, c *api.Client, wasm []byte, rev int, state *revisionCounter) error {
	mod, err := c.PutModule(ctx, wasm)
	if err != nil {
		return err
	}
	spec, _ := json.Marshal(map[string]any{"name": "bench", "selector": "site=lobby", "tools": []string{mod.SHA256}, "device_timeout": "5m"})
	done := state.doneAt(rev)
	out, err := c.ApplyRollout(ctx, spec)
	if err != nil {
		return err
	}
	if out.Revision != rev {
		return fmt.Errorf("applied revision %d, want %d", out.Revision, rev)
	}
	select {
	case <-done:
		return nil
	case <-time.After(15 * time.Minute):
		return fmt.Errorf("revision %d: %d of %d devices reported it within 15 minutes", rev, state.count(rev), state.want)
	}
}

// revisionCounter counts the devices that reported each revision, and
// closes its channel once all have.
type revisionCounter struct {
	mu   sync.Mutex
	want int
	at   map[int]int
	done map[int]chan struct{}
}

func (c *revisionCounter) doneAt(rev int) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chanOf(rev)
}

func (c *revisionCounter) chanOf(rev int) chan struct{} {
	if c.done[rev] == nil {
		c.done[rev] = make(chan struct{})
	}
	return c.done[rev]
}

func (c *revisionCounter) reported(rev int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at[rev]++; c.at[rev] == c.want {
		close(c.chanOf(rev))
	}
}

func (c *revisionCounter) count(rev int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at[rev]
}

// rolloutDevice is a simulated device that keeps the modules it is
// staged and applies revisions as the agent does (checking each module's
// digest), then registers again with what it runs, and answers every
// other command at once.
type rolloutDevice struct {
	id      string
	conn    *protocol.Conn
	counter *revisionCounter
	modules []string
	runs    map[string]protocol.RolloutReport
	reg     atomic.Int64 // request ids of its registrations
}

// metaTools are the agent's meta tools the simulated devices list.
var metaTools = []protocol.MCPToolInfo{
	metaTool(protocol.StageModuleName, protocol.StageModuleSchema),
	metaTool(protocol.ApplyRevisionName, protocol.ApplyRevisionSchema),
	metaTool(protocol.InstallToolName, protocol.InstallToolSchema),
}

func metaTool(name string, schema map[string]any) protocol.MCPToolInfo {
	return protocol.MCPToolInfo{ToolKey: protocol.ToolKey(protocol.ToolAction, name), ToolName: name, Namespace: "computer",
		ToolType: protocol.ToolAction, InputSchema: schema}
}

func dialRolloutDevice(ctx context.Context, url, id, token string, counter *revisionCounter) (*rolloutDevice, error) {
	d := &rolloutDevice{id: id, counter: counter, runs: map[string]protocol.RolloutReport{}}
	conn, _, err := protocol.Dial(ctx, url, protocol.DialOptions{
		Header: http.Header{"Authorization": {"Bearer " + token}}, Encoding: protocol.CBOR,
		ConnOptions: protocol.ConnOptions{PingInterval: -1},
	})
	if err != nil {
		return nil, fmt.Errorf("device %s: %w", id, err)
	}
	d.conn = conn
	if err := conn.Send(ctx, d.registration()); err != nil {
		conn.CloseNow()
		return nil, fmt.Errorf("device %s: register: %w", id, err)
	}
	var ack protocol.ServerMessage
	if err := conn.Read(ctx, &ack); err != nil || ack.Type != protocol.ServerHeartbeat {
		conn.CloseNow()
		return nil, fmt.Errorf("device %s: register: ack %s %v", id, ack.Type, err)
	}
	return d, nil
}

// registration is the device's REGISTER: its tools and what it keeps and
// runs.
func (d *rolloutDevice) registration() *protocol.ClientMessage {
	m := registerMessage(d.id)
	info := m.Metadata[protocol.MetadataSystemInfo].(protocol.SystemInfo)
	info.Tools = append(slices.Clone(info.Tools), metaTools...)
	info.CustomMetadata = map[string]any{}
	protocol.AddRolloutMetadata(info.CustomMetadata, d.runs, d.modules)
	m.Metadata[protocol.MetadataSystemInfo] = info
	m.RequestID = fmt.Sprintf("%s-register-%d", d.id, d.reg.Add(1))
	return m
}

// answer answers commands until ctx ends; after applying a revision it
// registers again, as the agent does.
func (d *rolloutDevice) answer(ctx context.Context) {
	applied := 0
	run := func(actions []protocol.Command) []protocol.Result {
		var results []protocol.Result
		results, applied = d.run(actions)
		return results
	}
	answerCommands(ctx, d.conn, d.id, run, func(ctx context.Context) error {
		if applied == 0 {
			return nil
		}
		if err := d.conn.Send(ctx, d.registration()); err != nil {
			return err
		}
		d.counter.reported(applied)
		return nil
	})
}

// run runs actions, and says which revision it applied, if any.
func (d *rolloutDevice) run(actions []protocol.Command) ([]protocol.Result, int) {
	results := make([]protocol.Result, len(actions))
	applied := 0
	for i, a := range actions {
		res := protocol.Result{CallID: a.CallID, Status: protocol.ResultSuccess, Result: a.Parameters}
		var err error
		switch a.ToolName {
		case protocol.StageModuleName, protocol.InstallToolName:
			var wasm []byte
			if wasm, _, err = protocol.InstalledModule(a.Parameters); err == nil {
				sum := sha256.Sum256(wasm)
				d.modules = append(d.modules, hex.EncodeToString(sum[:]))
				res.Result = map[string]any{"sha256": hex.EncodeToString(sum[:])}
			}
		case protocol.ApplyRevisionName:
			var rev protocol.Revision
			if rev, err = protocol.ParseApplyRevision(a.Parameters); err == nil {
				d.runs[rev.Rollout] = protocol.RolloutReport{Revision: rev.Number, Tools: rev.Tools}
				applied = rev.Number
				res.Result = map[string]any{"rollout": rev.Rollout, "revision": rev.Number}
			}
		}
		if err != nil {
			res = protocol.Result{CallID: a.CallID, Status: protocol.ResultFailure, Error: err.Error()}
		}
		results[i] = res
	}
	return results, applied
}
