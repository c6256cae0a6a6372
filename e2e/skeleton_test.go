package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// onlyResult returns the single Result of a one-action command.
func onlyResult(t *testing.T, resp api.CommandResponse) protocol.Result {
	t.Helper()
	require.Len(t, resp.Results, 1)
	require.NotEmpty(t, resp.Results[0].CallID, "every Result carries its call_id")
	return resp.Results[0]
}

func requireFailure(t *testing.T, resp api.CommandResponse, wantErr string) {
	t.Helper()
	r := onlyResult(t, resp)
	assert.Equal(t, protocol.ResultFailure, r.Status)
	assert.Contains(t, r.Error, wantErr)
	assert.Equal(t, "failure", resp.Status)
}

func TestOperatorRunsStockToolsOnADevice(t *testing.T) {
	c := newCluster(t)
	files := t.TempDir()
	content := []byte("kiosk config v1\n")
	require.NoError(t, os.WriteFile(filepath.Join(files, "config.txt"), content, 0o644))
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), withMounts(sandbox.Mount{HostPath: files, GuestPath: files}))

	dev := c.device("kiosk-1")
	require.NotNil(t, dev.Info, "registration carries system info")
	assert.Equal(t, "kiosk-1", dev.Info.DeviceID)
	assert.NotZero(t, dev.Info.CPUCount)
	assert.NotNil(t, dev.LastSeen)

	t.Run("list_tools", func(t *testing.T) {
		r := onlyResult(t, c.exec("kiosk-1", "list_tools", nil, 10*time.Second))
		require.Equal(t, protocol.ResultSuccess, r.Status, r.Error)
		keys := map[string]string{}
		for _, ti := range r.Result.([]any) {
			m := ti.(map[string]any)
			keys[m["tool_key"].(string)] = m["namespace"].(string)
		}
		assert.Equal(t, "stock", keys["data_collection::hash_file"])
		assert.Equal(t, "stock", keys["action::write_file"])
		assert.Equal(t, "fixtures", keys["action::trap"])
		assert.NotContains(t, keys, "action::list_tools", "meta tools are removed by default")

		r = onlyResult(t, c.exec("kiosk-1", "list_tools", map[string]any{"tool_type": "action", "namespace": "stock", "remove_meta": false}, 10*time.Second))
		require.Equal(t, protocol.ResultSuccess, r.Status, r.Error)
		var names []string
		for _, ti := range r.Result.([]any) {
			names = append(names, ti.(map[string]any)["tool_name"].(string))
		}
		assert.Equal(t, []string{"write_file"}, names)
	})

	t.Run("hash_file", func(t *testing.T) {
		sum := sha256.Sum256(content)
		r := onlyResult(t, c.exec("kiosk-1", "hash_file", map[string]any{"path": filepath.Join(files, "config.txt")}, 10*time.Second))
		require.Equal(t, protocol.ResultSuccess, r.Status, r.Error)
		assert.Equal(t, hex.EncodeToString(sum[:]), r.Result.(map[string]any)["sha256"])
		assert.Equal(t, "stock", r.Namespace)
		require.NotNil(t, r.Usage)
		assert.Positive(t, r.Usage.WallMicros)
		assert.Positive(t, r.Usage.StdoutBytes)
		assert.Positive(t, r.Usage.MemoryPages, "peak memory survives the tool's exit")
	})

	t.Run("write_file then read_file and list_dir", func(t *testing.T) {
		path := filepath.Join(files, "note.txt")
		r := onlyResult(t, c.exec("kiosk-1", "write_file", map[string]any{"path": path, "content": "hello"}, 10*time.Second))
		require.Equal(t, protocol.ResultSuccess, r.Status, r.Error)
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, "hello", string(got))

		r = onlyResult(t, c.exec("kiosk-1", "read_file", map[string]any{"path": path}, 10*time.Second))
		require.Equal(t, protocol.ResultSuccess, r.Status, r.Error)
		assert.Equal(t, "hello", r.Result.(map[string]any)["content"])

		r = onlyResult(t, c.exec("kiosk-1", "list_dir", map[string]any{"path": files}, 10*time.Second))
		require.Equal(t, protocol.ResultSuccess, r.Status, r.Error)
		assert.Len(t, r.Result.(map[string]any)["entries"], 2)
	})

	t.Run("no file outside the allowed dirs", func(t *testing.T) {
		requireFailure(t, c.exec("kiosk-1", "read_file", map[string]any{"path": "/etc/hostname"}, 10*time.Second), "open /etc/hostname: not under a directory this tool was granted")
		requireFailure(t, c.exec("kiosk-1", "read_file", map[string]any{"path": files + "/../../etc/hostname"}, 10*time.Second), "not under a directory this tool was granted")
	})

	t.Run("several actions run in order, with early exit", func(t *testing.T) {
		resp, err := c.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{
			{ToolName: "hash_file", Parameters: map[string]any{"path": filepath.Join(files, "config.txt")}},
			{ToolName: "trap"},
			{ToolName: "hash_file", Parameters: map[string]any{"path": filepath.Join(files, "config.txt")}},
		}})
		require.NoError(t, err)
		require.Len(t, resp.Results, 3)
		assert.Equal(t, protocol.ResultSuccess, resp.Results[0].Status)
		assert.Equal(t, protocol.ResultFailure, resp.Results[1].Status)
		assert.Equal(t, protocol.ResultSkipped, resp.Results[2].Status)
		assert.Equal(t, "skipped due to previous failure", resp.Results[2].Error)
		assert.Equal(t, "failure", resp.Status)
	})
}

func TestBadToolsFailCleanlyAndTheAgentKeepsServing(t *testing.T) {
	c := newCluster(t)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), withLimits(sandbox.Limits{Timeout: 300 * time.Millisecond, MemoryPages: 64}))

	assert.Equal(t, []api.Problem{{Path: "actions[0].tool_name", Problem: `device "kiosk-1" has no tool "no_such_tool"`}},
		c.refusal("kiosk-1", "no_such_tool", nil), "refused before it is sent")
	requireFailure(t, c.exec("kiosk-1", "trap", nil, 10*time.Second), `tool "trap": trapped: wasm error: unreachable`)
	requireFailure(t, c.exec("kiosk-1", "membomb", nil, 10*time.Second), `memory limit reached (64 pages)`)
	requireFailure(t, c.exec("kiosk-1", "spin", nil, 10*time.Second), `tool "spin": timed out after 300ms`)
	requireFailure(t, c.exec("kiosk-1", "fail", nil, 10*time.Second), `exited with status 3: disk on fire`)

	r := onlyResult(t, c.exec("kiosk-1", "echo", map[string]any{"still": "alive"}, 10*time.Second))
	require.Equal(t, protocol.ResultSuccess, r.Status, r.Error)
	assert.Equal(t, map[string]any{"still": "alive"}, r.Result)
}

func TestEveryOutcomeIsAResult(t *testing.T) {
	c := newCluster(t)
	c.enroll("offline-1")

	t.Run("device offline", func(t *testing.T) {
		requireFailure(t, c.exec("offline-1", "echo", nil, 10*time.Second), `device "offline-1" is offline`)
	})

	t.Run("device does not answer in time", func(t *testing.T) {
		c.startAgent("slow-1", c.enroll("slow-1"), withLimits(sandbox.Limits{Timeout: time.Minute}))
		requireFailure(t, c.exec("slow-1", "spin", nil, 300*time.Millisecond), `device "slow-1" did not answer within 300ms`)
	})

	t.Run("link drops and the device comes back within the timeout", func(t *testing.T) {
		proxy := newCutProxy(t, strings.TrimPrefix(c.http.URL, "http://"))
		seen := make(chan string, 100)
		c.startAgent("flaky-1", c.enroll("flaky-1"), withLimits(sandbox.Limits{Timeout: time.Second}), watchLog(seen),
			func(cfg *agent.Config) { cfg.ServerURL = "ws://" + proxy.addr() + "/ws" })

		done := make(chan api.CommandResponse, 1)
		go func() { done <- c.exec("flaky-1", "spin", nil, time.Minute) }()
		waitForLog(t, seen, "command received")
		proxy.cut()
		// The server keeps the command, sends it again once the agent has
		// registered on a new link, and the device's answer ends it: the
		// tool's own failure, not a link error.
		requireFailure(t, <-done, `tool "spin": `)
		r := onlyResult(t, c.exec("flaky-1", "echo", nil, 10*time.Second))
		assert.Equal(t, protocol.ResultSuccess, r.Status, r.Error)
	})

	t.Run("link drops and the device does not come back in time", func(t *testing.T) {
		proxy := newCutProxy(t, strings.TrimPrefix(c.http.URL, "http://"))
		seen := make(chan string, 100)
		c.startAgent("gone-1", c.enroll("gone-1"), withLimits(sandbox.Limits{Timeout: time.Minute}), watchLog(seen),
			func(cfg *agent.Config) {
				cfg.ServerURL = "ws://" + proxy.addr() + "/ws"
				cfg.ShutdownGrace = 100 * time.Millisecond // the spin it runs is canceled at the end
			})

		done := make(chan api.CommandResponse, 1)
		go func() { done <- c.exec("gone-1", "spin", nil, 2*time.Second) }()
		waitForLog(t, seen, "command received")
		// The network goes and stays gone. (Stopping the agent would not do:
		// it finishes what it runs, on its link, before it goes.)
		proxy.refuse()
		proxy.cut()
		requireFailure(t, <-done, `link to device "gone-1" dropped and the device did not come back within 2s`)
	})
}

func waitForLog(t *testing.T, seen <-chan string, msg string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case m := <-seen:
			if m == msg {
				return
			}
		case <-timeout:
			t.Fatalf("agent never logged %q", msg)
		}
	}
}

func TestDevicesWithoutAValidTokenAreRefusedAtUpgrade(t *testing.T) {
	c := newCluster(t)
	c.enroll("kiosk-1")
	ctx := context.Background()
	for name, header := range map[string]http.Header{
		"no token":    {},
		"wrong token": {"Authorization": {"Bearer aipd_not-a-real-token"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, resp, err := websocket.Dial(ctx, c.wsURL(), &websocket.DialOptions{HTTPHeader: header, Subprotocols: []string{protocol.Subprotocol}})
			require.Error(t, err)
			require.NotNil(t, resp)
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		})
	}
	devs, err := c.api.Devices(ctx)
	require.NoError(t, err)
	require.Len(t, devs, 1)
	assert.False(t, devs[0].Online, "nothing was registered")
	assert.Nil(t, devs[0].LastSeen)
}

func TestMalformedFrameGetsAnErrorAndTheConnectionStays(t *testing.T) {
	c := newCluster(t)
	tokenFile := c.enroll("raw-1")
	token, err := os.ReadFile(tokenFile)
	require.NoError(t, err)
	ctx := context.Background()
	ws, _, err := websocket.Dial(ctx, c.wsURL(), &websocket.DialOptions{
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + string(token)}},
		Subprotocols: []string{protocol.Subprotocol},
	})
	require.NoError(t, err)
	defer ws.CloseNow()

	send := func(m any) {
		b, err := protocol.CBOR.Marshal(m)
		require.NoError(t, err)
		require.NoError(t, ws.Write(ctx, websocket.MessageBinary, b))
	}
	recv := func() protocol.ServerMessage {
		_, b, err := ws.Read(ctx)
		require.NoError(t, err)
		var m protocol.ServerMessage
		require.NoError(t, protocol.CBOR.Unmarshal(b, &m))
		return m
	}
	send(protocol.ClientMessage{Type: protocol.ClientRegister, Status: protocol.StatusOK, ClientID: "raw-1"})
	ack := recv()
	require.Equal(t, protocol.ServerHeartbeat, ack.Type)
	require.Equal(t, protocol.StatusOK, ack.Status)

	require.NoError(t, ws.Write(ctx, websocket.MessageBinary, []byte{0xff, 0x00, 0x13}))
	e := recv()
	assert.Equal(t, protocol.ServerError, e.Type)
	assert.Contains(t, e.Error, "malformed frame")

	send(map[string]any{"type": "heartbeat", "status": "sleepy"})
	e = recv()
	assert.Equal(t, protocol.ServerError, e.Type)
	assert.Contains(t, e.Error, `field "status": unknown value "sleepy"`)

	send(protocol.ClientMessage{Type: protocol.ClientHeartbeat, Status: protocol.StatusOK, ClientID: "raw-1"})
	hb := recv()
	assert.Equal(t, protocol.ServerHeartbeat, hb.Type, "the connection is still up")
	assert.True(t, c.device("raw-1").Online)
}

func TestRevokingADeviceClosesItsLinkAtOnce(t *testing.T) {
	c := newCluster(t)
	seen := make(chan string, 100)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), watchLog(seen))
	require.NoError(t, c.api.Do(context.Background(), "DELETE", "/api/devices/kiosk-1", nil, nil))
	waitForLog(t, seen, "link down; reconnecting")
	devs, err := c.api.Devices(context.Background())
	require.NoError(t, err)
	assert.Empty(t, devs)
	// The agent keeps trying, and its token is refused at every attempt.
	_, err = c.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
	var se *api.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusNotFound, se.Code)
}
