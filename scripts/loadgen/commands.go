package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/google/uuid"
)

// commandsConfig is what the commands mode runs.
type commandsConfig struct {
	devices, callers int
	warmup, duration time.Duration
	maxCommands      int
	keys             bool   // send an Idempotency-Key with each command, as aipctl and the Go client do
	profileDir       string // if set, a CPU profile of each run's measured part is kept here
}

// commandsRun is what one run measured.
type commandsRun struct {
	commands    int
	wall        time.Duration
	cpu         time.Duration
	p50, p99    time.Duration
	profilePath string
	db          *dbSide // on PostgreSQL with -pg-pid; nil otherwise
}

func (r commandsRun) perSecond() float64 { return float64(r.commands) / r.wall.Seconds() }
func (r commandsRun) cpuPerCommand() time.Duration {
	return r.cpu / time.Duration(max(r.commands, 1))
}

// runCommands starts bin's nodes, connects cfg.devices simulated devices
// that answer every command at once, device i to node i mod nodes, and
// has cfg.callers operators call POST /api/devices/{id}/commands in a
// loop, caller i on device i mod devices, each command through the next
// node in turn: first for cfg.warmup, then measured for cfg.duration (or
// until cfg.maxCommands). CPU is the nodes', summed; a profile is node 1's.
// On PostgreSQL with cc.pgPID, it measures the database's side too.
func runCommands(ctx context.Context, bin serverBin, work string, cc clusterConfig, cfg commandsConfig, round int) (commandsRun, error) {
	f, tokens, err := startFleet(ctx, bin, work, cc, cfg.devices)
	if err != nil {
		return commandsRun{}, err
	}
	defer f.stop()
	dctx, stopDevices := context.WithCancel(ctx)
	defer stopDevices()
	var devices sync.WaitGroup
	defer devices.Wait()
	defer stopDevices()
	for i, token := range tokens {
		d, err := dialAnswering(dctx, f.nodes[i%len(f.nodes)].wsURL(), deviceID(i), token)
		if err != nil {
			return commandsRun{}, err
		}
		devices.Go(func() { d.answer(dctx) })
	}
	ops := newOperators(f.nodes, cfg)
	defer ops.client.CloseIdleConnections()
	meter, err := newDBMeter(ctx, cc, f.db)
	if err != nil {
		return commandsRun{}, err
	}
	warm, err := ops.run(ctx, cfg.warmup, 0)
	if err != nil {
		return commandsRun{}, fmt.Errorf("warm-up: %w", err)
	}
	var profile chan error
	var run commandsRun
	if cfg.profileDir != "" {
		run.profilePath = filepath.Join(cfg.profileDir, fmt.Sprintf("%s-%d.pprof", bin.name, round))
		profile = make(chan error, 1)
		go func() {
			profile <- f.nodes[0].profile(ctx, bin, max(int(cfg.duration.Seconds()), 1), run.profilePath)
		}()
	}
	cpu0, err := f.cpu()
	if err != nil {
		return commandsRun{}, err
	}
	if err := meter.measuredStarts(); err != nil {
		return commandsRun{}, err
	}
	start := time.Now()
	lat, err := ops.run(ctx, cfg.duration, cfg.maxCommands)
	run.wall = time.Since(start)
	if err != nil {
		return commandsRun{}, err
	}
	cpu1, err := f.cpu()
	if err != nil {
		return commandsRun{}, err
	}
	if err := meter.measuredEnds(); err != nil {
		return commandsRun{}, err
	}
	if run.db, err = meter.result(ctx, len(warm)+len(lat)); err != nil {
		return commandsRun{}, err
	}
	if profile != nil {
		if err := <-profile; err != nil {
			return commandsRun{}, err
		}
	}
	slices.Sort(lat)
	run.commands, run.cpu = len(lat), cpu1-cpu0
	run.p50, run.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	return run, nil
}

// answeringDevice is a simulated device that answers every COMMAND at
// once, each action succeeding with its parameters as its result.
type answeringDevice struct {
	id   string
	conn *protocol.Conn
}

// echoTool is the one tool the simulated devices list: the shape of the
// agent's stock echo tool, so that admission checks parameters against a
// schema as it does for a real device.
var echoTool = protocol.MCPToolInfo{
	ToolKey: protocol.ToolKey(protocol.ToolAction, "echo"), ToolName: "echo", Namespace: "fixtures",
	ToolType: protocol.ToolAction, Description: "copies stdin to stdout.", InputSchema: map[string]any{"type": "object"},
}

// registerMessage is what a simulated device registers with: a small
// system info listing echoTool.
func registerMessage(id string) *protocol.ClientMessage {
	info := protocol.SystemInfo{DeviceID: id, Platform: "linux", OSVersion: "loadgen", CPUCount: 1, Hostname: id,
		SupportedFeatures: []string{"wasm_tools"}, SchemaVersion: "1.0", CustomMetadata: map[string]any{},
		Arch: "amd64", AgentVersion: "loadgen", Tools: []protocol.MCPToolInfo{echoTool}}
	return &protocol.ClientMessage{Type: protocol.ClientRegister, Status: protocol.StatusOK, ClientType: protocol.ClientDevice,
		ClientID: id, Timestamp: protocol.Now(), Metadata: map[string]any{protocol.MetadataSystemInfo: info, "platform": "linux"}}
}

// dialAnswering connects and registers device id.
func dialAnswering(ctx context.Context, url, id, token string) (*answeringDevice, error) {
	conn, _, err := protocol.Dial(ctx, url, protocol.DialOptions{
		Header:      http.Header{"Authorization": {"Bearer " + token}},
		Encoding:    protocol.CBOR,
		ConnOptions: protocol.ConnOptions{PingInterval: -1},
	})
	if err != nil {
		return nil, fmt.Errorf("device %s: %w", id, err)
	}
	if err := conn.Send(ctx, registerMessage(id)); err != nil {
		conn.CloseNow()
		return nil, fmt.Errorf("device %s: register: %w", id, err)
	}
	var ack protocol.ServerMessage
	if err := conn.Read(ctx, &ack); err != nil || ack.Type != protocol.ServerHeartbeat {
		conn.CloseNow()
		return nil, fmt.Errorf("device %s: register: ack %s %v", id, ack.Type, err)
	}
	return &answeringDevice{id: id, conn: conn}, nil
}

// answer answers commands until ctx ends.
func (d *answeringDevice) answer(ctx context.Context) {
	answerCommands(ctx, d.conn, d.id, func(actions []protocol.Command) []protocol.Result {
		results := make([]protocol.Result, len(actions))
		for i, a := range actions {
			results[i] = protocol.Result{CallID: a.CallID, Status: protocol.ResultSuccess, Result: a.Parameters}
		}
		return results
	}, nil)
}

// answerCommands answers each COMMAND on conn, device id's, with what run
// makes of its actions, then calls after, if not nil, until ctx ends or
// a send or after fails; then it closes conn.
func answerCommands(ctx context.Context, conn *protocol.Conn, id string, run func([]protocol.Command) []protocol.Result, after func(context.Context) error) {
	defer conn.CloseNow()
	for {
		var m protocol.ServerMessage
		if err := conn.Read(ctx, &m); err != nil {
			return
		}
		if m.Type != protocol.ServerCommand {
			continue // acks of our results
		}
		reply := &protocol.ClientMessage{Type: protocol.ClientCommandResults, Status: protocol.StatusContinue, ClientID: id,
			SessionID: m.SessionID, RequestID: uuid.NewString(), PrevResponseID: m.ResponseID, Timestamp: protocol.Now(),
			ActionResults: run(m.Actions)}
		if err := conn.Send(ctx, reply); err != nil {
			return
		}
		if after != nil && after(ctx) != nil {
			return
		}
	}
}

// operators call the command API, through every node in turn.
type operators struct {
	nodes  []*server
	cfg    commandsConfig
	client *http.Client
	body   []byte
}

func newOperators(nodes []*server, cfg commandsConfig) *operators {
	body, _ := json.Marshal(api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo", Parameters: map[string]any{"n": 1}}},
		Timeout: "30s"})
	return &operators{nodes: nodes, cfg: cfg, body: body,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.callers, DisableCompression: true}}}
}

// run has every caller send commands for d, or until limit commands in
// all if limit > 0, and returns each command's latency. A command that
// fails stops the run.
func (o *operators) run(ctx context.Context, d time.Duration, limit int) ([]time.Duration, error) {
	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs = make(chan error, o.cfg.callers)
		n    atomic.Int64
		wg   sync.WaitGroup
	)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	end := time.Now().Add(d)
	for i := range o.cfg.callers {
		wg.Go(func() {
			var mine []time.Duration
			defer func() { mu.Lock(); lat = append(lat, mine...); mu.Unlock() }()
			for k := i; time.Now().Before(end) && (limit <= 0 || n.Add(1) <= int64(limit)); k++ {
				start := time.Now()
				if err := o.command(rctx, o.nodes[k%len(o.nodes)], deviceID(i%o.cfg.devices)); err != nil {
					errs <- err
					cancel()
					return
				}
				mine = append(mine, time.Since(start))
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	if len(lat) == 0 {
		return nil, fmt.Errorf("no command completed in %s", d)
	}
	return lat, nil
}

// command runs one command through node and checks that it succeeded.
func (o *operators) command(ctx context.Context, node *server, device string) error {
	req, err := http.NewRequestWithContext(ctx, "POST", node.API.BaseURL+"/api/devices/"+device+"/commands", bytes.NewReader(o.body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+node.API.Token)
	req.Header.Set("Content-Type", "application/json")
	if o.cfg.keys {
		req.Header.Set(api.IdempotencyKeyHeader, uuid.NewString())
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return fmt.Errorf("command on %s through %s: %w", device, node.Addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("command on %s through %s: %w", device, node.Addr, err)
	}
	var out api.CommandResponse
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || !out.Succeeded() {
		return fmt.Errorf("command on %s through %s: %s: %s", device, node.Addr, resp.Status, b)
	}
	return nil
}
