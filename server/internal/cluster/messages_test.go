package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// joinLogged joins id with its log in the returned buffer.
func (e *env) joinLogged(id string) (*Cluster, *testenv.LogBuffer) {
	out := &testenv.LogBuffer{}
	c, err := Join(context.Background(), Config{NATS: e.nats.URL(), NodeID: id, Address: id + ":8700", Store: e.open(),
		Heartbeat: fastBeat, DeadAfter: fastDead, Logger: slog.New(slog.NewTextHandler(out, nil))})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { c.Close(context.Background()) })
	return c, out
}

// wellFormed is a command as node from, at epoch 1, sends it for device.
func wellFormed(device, from string) Command {
	return Command{DeviceID: device, LeaseEpoch: 1, From: from, FromEpoch: 1, Timeout: time.Second,
		Message: &protocol.ServerMessage{Type: protocol.ServerCommand, ResponseID: "r-1"}}
}

// raw sends data as a request on subject, with version v ("": none), and
// decodes the reply.
func raw(t *testing.T, nc *nats.Conn, subject, v string, data []byte) Reply {
	t.Helper()
	m := nats.NewMsg(subject)
	if v != "" {
		m.Header.Set(versionHeader, v)
	}
	m.Data = data
	resp, err := nc.RequestMsg(m, 5*time.Second)
	require.NoError(t, err)
	var r Reply
	require.NoError(t, json.Unmarshal(resp.Data, &r))
	return r
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// serveCounting serves device id on c, counting the commands served.
func serveCounting(t *testing.T, c *Cluster, id string) *atomic.Int32 {
	var served atomic.Int32
	stop, err := c.ServeDevice(id, func(Command) Reply { served.Add(1); return Reply{Outcome: Sent} })
	require.NoError(t, err)
	t.Cleanup(stop)
	return &served
}

// A command no node of this version sends is refused, naming what is
// wrong, and never reaches the device; nor does one that comes without a
// reply subject, which nobody awaits.
func TestACommandNoNodeSendsIsRefusedAndNotServed(t *testing.T) {
	e := newEnv(t)
	a, b := e.mustJoin("a"), e.mustJoin("b")
	served := serveCounting(t, a, "kiosk-1")
	v := strconv.Itoa(ProtocolVersion)
	edit := func(f func(*Command)) []byte {
		cmd := wellFormed("kiosk-1", "b")
		f(&cmd)
		return mustJSON(t, cmd)
	}
	for _, tc := range []struct {
		name, want string
		data       []byte
	}{
		{"not JSON", "invalid character", []byte("\x00\xffcbor?")},
		{"truncated", "unexpected end of JSON input", edit(func(*Command) {})[:40]},
		{"wrong type of field", "cannot unmarshal string", []byte(`{"device_id":"kiosk-1","lease_epoch":"1"}`)},
		{"no message", `field "message": missing`, edit(func(c *Command) { c.Message = nil })},
		{"a heartbeat, not a command", `type "heartbeat": want "command" or "cancel_command"`,
			edit(func(c *Command) { c.Message.Type = protocol.ServerHeartbeat })},
		{"no response id", `response_id missing`, edit(func(c *Command) { c.Message.ResponseID = "" })},
		{"negative timeout", `field "timeout": -1s`, edit(func(c *Command) { c.Timeout = -time.Second })},
		{"no lease epoch", `field "lease_epoch": epoch 0`, edit(func(c *Command) { c.LeaseEpoch = 0 })},
		{"no sender", `field "from": node id ""`, edit(func(c *Command) { c.From = "" })},
		{"a sender that would be a wildcard subject", `field "from": node id "*"`, edit(func(c *Command) { c.From = "*" })},
		{"a sender with a dot", `field "from": node id "b.x"`, edit(func(c *Command) { c.From = "b.x" })},
		{"no sender epoch", `field "from_epoch": epoch 0`, edit(func(c *Command) { c.FromEpoch = 0 })},
		{"another device's command", `command for device "kiosk-2" came on the subject of device "kiosk-1"`,
			edit(func(c *Command) { c.DeviceID = "kiosk-2" })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := raw(t, b.nc, deviceSubject("kiosk-1"), v, tc.data)
			assert.Equal(t, Failed, r.Outcome)
			assert.Contains(t, r.Error, tc.want)
		})
	}
	assert.Zero(t, served.Load())

	m := nats.NewMsg(deviceSubject("kiosk-1"))
	m.Header.Set(versionHeader, v)
	m.Data = edit(func(*Command) {})
	require.NoError(t, b.nc.PublishMsg(m))
	require.NoError(t, b.nc.Flush())
	r := raw(t, b.nc, deviceSubject("kiosk-1"), v, edit(func(*Command) {}))
	assert.Equal(t, Sent, r.Outcome)
	assert.Equal(t, int32(1), served.Load(), "the command published without a reply subject is not served")
}

// A node that was fenced, or whose id a later process took over, sends
// nothing to a device any more.
func TestACommandFromAStaleNodeEpochIsRefused(t *testing.T) {
	e := newEnv(t)
	a, old := e.mustJoin("a"), e.mustJoin("b")
	served := serveCounting(t, a, "kiosk-1")
	r, err := old.SendCommand(context.Background(), wellFormed("kiosk-1", "b"))
	require.NoError(t, err)
	require.Equal(t, Sent, r.Outcome)

	old.die()
	require.Eventually(t, func() bool { return a.notLive("b", 1) != "" }, 5*time.Second, 10*time.Millisecond)
	r, err = a.SendCommand(context.Background(), wellFormed("kiosk-1", "b"))
	require.NoError(t, err)
	assert.Equal(t, Failed, r.Outcome)
	assert.Contains(t, r.Error, `from node "b" at epoch 1: that node is gone`)
	assert.True(t, r.SenderGone, "the sender must not record it failed: the node that adopts its session sends it again")

	next := e.mustJoin("b")
	_, epoch := next.Self()
	require.Equal(t, int64(2), epoch)
	require.Eventually(t, func() bool { return a.IsLive("b") }, 5*time.Second, 10*time.Millisecond)
	r, err = next.SendCommand(context.Background(), wellFormed("kiosk-1", "b"))
	require.NoError(t, err)
	assert.Equal(t, Failed, r.Outcome)
	assert.Contains(t, r.Error, `node "b" is at epoch 2 now`)

	cmd := wellFormed("kiosk-1", "b")
	cmd.FromEpoch = 2
	r, err = next.SendCommand(context.Background(), cmd)
	require.NoError(t, err)
	assert.Equal(t, Sent, r.Outcome)

	for from, want := range map[string]string{"nobody": `from node "nobody" at epoch 1: no node of that id ever joined`,
		"b": `from node "b" at epoch 3: node "b" is at epoch 2`} {
		cmd.From, cmd.FromEpoch = from, 1
		if from == "b" {
			cmd.FromEpoch = 3
		}
		r, err = next.SendCommand(context.Background(), cmd)
		require.NoError(t, err)
		assert.Equal(t, Failed, r.Outcome)
		assert.Contains(t, r.Error, want)
	}

	// A node that joined since the last sweep is live at once.
	late := e.mustJoin("c")
	r, err = late.SendCommand(context.Background(), wellFormed("kiosk-1", "c"))
	require.NoError(t, err)
	assert.Equal(t, Sent, r.Outcome)
	assert.Equal(t, int32(3), served.Load())
}

// A reply the sender cannot read (another version, an outcome it does
// not know, not JSON) fails the command, naming it, where the command
// used to wait, unsent, for its timeout.
func TestAReplyNotUnderstoodFailsTheCommandNamingIt(t *testing.T) {
	e := newEnv(t)
	b := e.mustJoin("b")
	peer, err := nats.Connect(e.nats.URL())
	require.NoError(t, err)
	defer peer.Close()
	answer := func(t *testing.T, v string, data string) {
		sub, err := peer.Subscribe(deviceSubject("kiosk-1"), func(m *nats.Msg) {
			out := nats.NewMsg(m.Reply)
			out.Header.Set(versionHeader, v)
			out.Data = []byte(data)
			m.RespondMsg(out)
		})
		require.NoError(t, err)
		require.NoError(t, peer.Flush())
		t.Cleanup(func() { sub.Unsubscribe() })
	}
	v := strconv.Itoa(ProtocolVersion)
	for _, tc := range []struct{ name, version, data, want string }{
		{"another version", strconv.Itoa(ProtocolVersion + 1), `{"outcome":"sent"}`, `inter-node protocol version "2", this node 1`},
		{"unknown outcome", v, `{"outcome":"queued"}`, `field "outcome": "queued": not an outcome this node knows`},
		{"no outcome", v, `{}`, `field "outcome": ""`},
		{"not JSON", v, `sent`, `invalid character`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer(t, tc.version, tc.data)
			r, err := b.SendCommand(context.Background(), wellFormed("kiosk-1", "b"))
			require.NoError(t, err)
			assert.Equal(t, Failed, r.Outcome)
			assert.Contains(t, r.Error, tc.want)
		})
	}
}

// publishRaw publishes data on subject at this node's version.
func publishRaw(t *testing.T, nc *nats.Conn, subject string, data []byte) {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Header.Set(versionHeader, strconv.Itoa(ProtocolVersion))
	m.Data = data
	require.NoError(t, nc.PublishMsg(m))
}

// The messages every node hears are dropped and logged when no node of
// this version sends them so; the well-formed one after them is acted on.
func TestMalformedBroadcastsAreLoggedAndDropped(t *testing.T) {
	e := newEnv(t)
	a, log := e.joinLogged("a")
	b := e.mustJoin("b")
	var mu sync.Mutex
	var heard []string
	hear := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, what)
	}
	require.NoError(t, a.OnLease(func(l LeaseChange) { hear("lease " + l.DeviceID) }))
	require.NoError(t, a.Returns().OnRecorded(func(r Recorded) { hear("recorded " + r.ResponseID) }))
	require.NoError(t, a.OnRevocation(func(r Revocation) { hear("revocation " + r.Identity) }))
	require.NoError(t, a.OnDeviceEvent(func(d DeviceEvent) { hear("event " + d.What) }))
	require.NoError(t, a.Returns().OnUnrecorded(func(u Unrecorded) { hear("unrecorded " + u.ResponseID) }))
	require.NoError(t, a.nc.Flush()) // subscribed before b publishes
	bad := []struct {
		subject, data, want string
	}{
		{leaseSubject, `{"device_id":"k","epoch":0}`, `field \"epoch\": epoch 0`},
		{leaseSubject, `{"device_id":"k","epoch":3,"node_id":"x>","node_epoch":1}`, `field \"node_id\": node id \"x>\"`},
		{leaseSubject, `{"epoch":3}`, `field \"device_id\": missing`},
		{leaseSubject, `[1,2`, `unexpected end of JSON input`},
		{recordedSubject, `{"device_id":"k"}`, `field \"response_id\": missing`},
		{nodeSubject("a"), `{"response_id":"r","device_id":"k","refused":"no","shut_down":true}`, `more than one given`},
		{recordedSubject, `{"response_id":"r","device_id":"k","results":"x"}`, `cannot unmarshal string`},
		{revokeSubject, `{"from":"b"}`, `field \"identity\": missing`},
		{revokeSubject, `{"from":"","identity":"ci"}`, `field \"from\": node id \"\"`},
		{deviceEventSubject, `{"from":"b","device_id":"k","what":"explode"}`, `field \"what\": \"explode\": not a device event`},
	}
	for _, m := range bad {
		publishRaw(t, b.nc, m.subject, []byte(m.data))
	}
	publishRaw(t, b.nc, leaseSubject, mustJSON(t, LeaseChange{DeviceID: "k", NodeID: "b", NodeEpoch: 1, Epoch: 3}))
	publishRaw(t, b.nc, leaseSubject, mustJSON(t, LeaseChange{DeviceID: "k2", Epoch: 3}))
	require.NoError(t, b.Returns().SendRecorded("a", Recorded{ResponseID: "r", DeviceID: "k", Refused: "no"}))
	require.NoError(t, b.PublishRevocation(Revocation{Identity: "ci"}))
	require.NoError(t, b.PublishDeviceEvent(DeviceEvent{DeviceID: "k", What: DeviceRevoked}))
	require.NoError(t, b.Returns().SendUnrecorded("a", Unrecorded{ResponseID: "u", DeviceID: "k", Why: "the store: down"}))
	want := []string{"lease k", "lease k2", "recorded r", "revocation ci", "event revoked", "unrecorded u"}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(heard) >= len(want) }, 5*time.Second, 10*time.Millisecond)
	mu.Lock()
	assert.ElementsMatch(t, want, heard)
	mu.Unlock()
	for _, m := range bad {
		assert.Contains(t, log.String(), m.want)
	}
}

// A handoff naming a node that is up is refused: its sessions stay its
// own; one from a node that drains is taken.
func TestAHandoffIsBelievedOnlyFromADrainingNode(t *testing.T) {
	e := newEnv(t)
	a, log := e.joinLogged("a")
	b := e.mustJoin("b")
	got := make(chan Handoff, 4)
	stop, err := a.OnHandoff(func(h Handoff) { got <- h })
	require.NoError(t, err)
	defer stop()
	require.NoError(t, a.nc.Flush())

	publishRaw(t, b.nc, handoffSubject, mustJSON(t, Handoff{From: "b", FromEpoch: 1}))
	publishRaw(t, b.nc, handoffSubject, mustJSON(t, Handoff{From: "nobody", FromEpoch: 1}))
	publishRaw(t, b.nc, handoffSubject, []byte(`b 1`))
	require.Eventually(t, func() bool {
		return bytes.Count([]byte(log.String()), []byte("handoff refused")) == 2 && bytes.Contains([]byte(log.String()), []byte("message dropped"))
	}, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, log.String(), `node \"b\" at epoch 1 is up, not draining`)
	assert.Contains(t, log.String(), `no node \"nobody\" ever joined`)
	assert.Empty(t, got)

	b.SetDraining()
	require.NoError(t, b.PublishHandoff(context.Background()))
	select {
	case h := <-got:
		assert.Equal(t, Handoff{From: "b", FromEpoch: 1}, h)
	case <-time.After(5 * time.Second):
		t.Fatal("the draining node's handoff was not taken")
	}
	nodes, err := a.Nodes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, store.NodeDraining, nodes[1].State)
}

func TestAnUnrecordedNoticeSaysWhy(t *testing.T) {
	assert.ErrorContains(t, (&Unrecorded{ResponseID: "r", DeviceID: "k", From: "b"}).check(), `field "why": missing`)
	assert.ErrorContains(t, (&Unrecorded{ResponseID: "r", DeviceID: "k", From: "b>", Why: "down"}).check(), `field "from"`)
	assert.NoError(t, (&Unrecorded{ResponseID: "r", DeviceID: "k", From: "b", Why: "down"}).check())
}
