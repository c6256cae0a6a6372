package agent

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/agent/internal/logtest"
	"github.com/edgeaip/edgeaip/agent/internal/outbox"
	"github.com/edgeaip/edgeaip/agent/internal/outbox/outboxtest"
	"github.com/edgeaip/edgeaip/agent/internal/reply"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func calls(t *testing.T, res []protocol.Result) any {
	t.Helper()
	require.Len(t, res, 1)
	require.Equal(t, protocol.ResultSuccess, res[0].Status, res[0].Error)
	return res[0].Result.(map[string]any)["calls"]
}

func TestHeartbeatsFlowWhileAToolRuns(t *testing.T) {
	p := newTestPeer(t)
	cfg := agentConfig(t, p.url())
	cfg.HeartbeatInterval = 20 * time.Millisecond
	startAgent(t, cfg)
	l := p.next(t)

	m := newCommand("s1", action("pause", map[string]any{"ms": 800}))
	l.send(t, m)
	before := l.heartbeats.Load()
	l.results(t, m.ResponseID)
	assert.Greater(t, l.heartbeats.Load()-before, int64(3), "the read loop does not wait for the tool")
}

func TestCommandsOfDifferentSessionsRunConcurrentlyUpToTheBound(t *testing.T) {
	p := newTestPeer(t)
	cfg := agentConfig(t, p.url())
	cfg.MaxConcurrentCommands = 2
	startAgent(t, cfg)
	l := p.next(t)
	barrier := func(session, group string, n, waitMS int) *protocol.ServerMessage {
		m := newCommand(session, action("barrier", map[string]any{"group": group, "n": n, "wait_ms": waitMS}))
		l.send(t, m)
		return m
	}
	outcomes := func(n int) map[protocol.ResultStatus]int {
		out := map[protocol.ResultStatus]int{}
		for range n {
			r := l.next(t)
			out[r.ActionResults[0].Status]++
		}
		return out
	}

	barrier("a", "two", 2, 10000)
	barrier("b", "two", 2, 10000)
	assert.Equal(t, map[protocol.ResultStatus]int{protocol.ResultSuccess: 2}, outcomes(2),
		"two sessions run at the same time")

	for _, s := range []string{"c", "d", "e"} {
		barrier(s, "three", 3, 500)
	}
	assert.Equal(t, map[protocol.ResultStatus]int{protocol.ResultFailure: 3}, outcomes(3),
		"never more than MaxConcurrentCommands at once")

	barrier("f", "serial", 2, 300)
	barrier("f", "serial", 2, 300)
	assert.Equal(t, map[protocol.ResultStatus]int{protocol.ResultFailure: 2}, outcomes(2),
		"the commands of one session run one after another")
}

func TestACommandSentAgainIsAnsweredFromTheOutboxNotRunAgain(t *testing.T) {
	p := newTestPeer(t)
	startAgent(t, agentConfig(t, p.url()))
	l := p.next(t)

	m := newCommand("s1", action("count", nil))
	l.send(t, m)
	first := l.results(t, m.ResponseID)
	l.send(t, m)
	assert.Equal(t, first, l.results(t, m.ResponseID), "the same results, not a second run")

	slow := newCommand("s2", action("nap", map[string]any{"ms": 300}), action("count", nil))
	l.send(t, slow)
	l.send(t, slow) // while the first copy runs
	res := l.results(t, slow.ResponseID)
	assert.EqualValues(t, 2, res[1].Result.(map[string]any)["calls"])
	l.quiet(t, 500*time.Millisecond)

	m = newCommand("s3", action("count", nil))
	l.send(t, m)
	assert.EqualValues(t, 3, calls(t, l.results(t, m.ResponseID)), "count ran exactly once per command")
}

func TestResultsTheServerRefusesAreLoggedWithTheirIDs(t *testing.T) {
	p := newTestPeer(t)
	p.noAck.Store(true)
	ta := startAgent(t, agentConfig(t, p.url()))
	l := p.next(t)
	m := newCommand("s1", action("count", nil))
	l.send(t, m)
	reply := l.next(t)
	l.send(t, &protocol.ServerMessage{Type: protocol.ServerError, Status: protocol.StatusError, ResponseID: reply.RequestID, Error: "store full"})
	const refused = "server refused results; they are not sent again"
	require.Eventually(t, func() bool { return ta.logs.Contains(refused) }, 10*time.Second, 5*time.Millisecond)
	ta.logs.RequireIDs(t, refused, map[string]string{"device": "dev-1", "session_id": "s1", "response_id": m.ResponseID,
		"call_id": "call-count", "request_id": reply.RequestID})
}

func TestResultsComputedWhileTheLinkIsDownAreDeliveredAfterRegistration(t *testing.T) {
	p := newTestPeer(t)
	ta := startAgent(t, agentConfig(t, p.url()))
	l := p.next(t)

	m := newCommand("s1", action("pause", map[string]any{"ms": 300}), action("count", nil))
	l.send(t, m)
	require.Eventually(t, func() bool { return ta.logs.Contains("command received") }, 10*time.Second, 5*time.Millisecond)
	l.conn.CloseNow()

	l2 := p.next(t)
	res := l2.results(t, m.ResponseID)
	assert.Equal(t, protocol.ResultSuccess, res[0].Status)
	assert.EqualValues(t, 1, res[1].Result.(map[string]any)["calls"], "the command ran once, and was not sent again")
}

func TestResultsTheServerDidNotAcknowledgeGoOutAgainAfterReconnecting(t *testing.T) {
	p := newTestPeer(t)
	p.noAck.Store(true)
	startAgent(t, agentConfig(t, p.url()))
	l := p.next(t)
	m := newCommand("s1", action("count", nil))
	l.send(t, m)
	first := l.results(t, m.ResponseID)
	l.quiet(t, 300*time.Millisecond)

	p.noAck.Store(false)
	l.conn.CloseNow()
	l2 := p.next(t)
	assert.Equal(t, first, l2.results(t, m.ResponseID), "unasked, after registration")
	l2.conn.CloseNow()
	l3 := p.next(t)
	l3.quiet(t, 300*time.Millisecond) // acknowledged now: not sent again
}

func TestACommandRunningWhenTheAgentDiedIsReportedAfterRestartNotRunAgain(t *testing.T) {
	p := newTestPeer(t)
	cfg := agentConfig(t, p.url())
	// The agent died after recording the command as accepted: what a
	// SIGKILL during the tool call leaves on disk (e2e kills a real agent).
	m := newCommand("s1", action("count", nil), action("echo", nil))
	m.Actions[0].CallID, m.Actions[1].CallID = "c1", "c2"
	ob := openJournal(t, cfg)
	ob.Admit(m.ResponseID)
	require.NoError(t, ob.Accept(outbox.AcceptedOf(m)))
	ob.Close() // writes nothing, as a killed agent

	startAgent(t, cfg)
	l := p.next(t)
	want := []protocol.Result{
		{Status: protocol.ResultFailure, Error: "agent restarted while the command ran", CallID: "c1"},
		{Status: protocol.ResultFailure, Error: "agent restarted while the command ran", CallID: "c2"},
	}
	assert.Equal(t, want, l.results(t, m.ResponseID), "delivered after registration, unasked")
	l.send(t, m)
	assert.Equal(t, want, l.results(t, m.ResponseID), "sent again, it is not run")
	probe := newCommand("s2", action("count", nil))
	l.send(t, probe)
	assert.EqualValues(t, 1, calls(t, l.results(t, probe.ResponseID)), "count never ran for the interrupted command")
}

func TestGracefulShutdownFinishesCommandsInFlightAndFlushesTheOutbox(t *testing.T) {
	p := newTestPeer(t)
	cfg := agentConfig(t, p.url())
	cfg.ShutdownGrace = 5 * time.Second
	ta := startAgent(t, cfg)
	l := p.next(t)

	// Long enough that the link is still up when the late command is sent,
	// however slow the machine.
	m := newCommand("s1", action("pause", map[string]any{"ms": 2000}))
	l.send(t, m)
	waitAccepted(t, cfg, m)
	stopped := make(chan struct{})
	go func() { ta.stop(); close(stopped) }()
	require.Eventually(t, func() bool { return ta.logs.Contains("shutting down") }, 10*time.Second, 5*time.Millisecond)

	late := newCommand("s2", action("count", nil))
	l.send(t, late)
	res := l.results(t, m.ResponseID)
	assert.Equal(t, protocol.ResultSuccess, res[0].Status, "a command in flight finishes: %s", res[0].Error)
	<-stopped
	<-l.closed
	assert.Equal(t, websocket.StatusGoingAway, protocol.CloseStatus(l.readErr), "closed with a handshake: %v", l.readErr)
	assert.Empty(t, l.msgs, "a command that came during shutdown was not taken")
	assert.True(t, ta.logs.Contains("command not taken: the agent is shutting down"))
}

func TestShutdownCancelsCommandsThatOutlastTheGracePeriod(t *testing.T) {
	p := newTestPeer(t)
	cfg := agentConfig(t, p.url())
	cfg.ShutdownGrace = 200 * time.Millisecond
	ta := startAgent(t, cfg)
	l := p.next(t)

	m := newCommand("s1", action("nap", map[string]any{"ms": 30000}), action("count", nil))
	l.send(t, m)
	waitAccepted(t, cfg, m)
	go ta.stop()
	res := l.results(t, m.ResponseID)
	assert.Equal(t, protocol.ResultFailure, res[0].Status)
	assert.Contains(t, res[0].Error, "agent shutting down: the command was canceled")
	assert.Equal(t, protocol.ResultSkipped, res[1].Status)
}

func TestTheToolInventoryIsSentAgainWhenItChanges(t *testing.T) {
	p := newTestPeer(t)
	startAgent(t, agentConfig(t, p.url()))
	l := p.next(t)
	registered := inventory(t, l.register.Metadata)
	assert.Contains(t, registered, "action::count", "registration carries the MCP tools")
	assert.Contains(t, registered, "action::echo")

	l.send(t, newCommand("s1", action("grow", nil)))
	// The server may announce the new tool before it answers the call.
	got := map[protocol.ClientMessageType]protocol.ClientMessage{}
	for range 2 {
		m := l.next(t)
		got[m.Type] = m
	}
	require.Contains(t, got, protocol.ClientCommandResults)
	require.Contains(t, got, protocol.ClientRegister, "registers again on the same link")
	assert.Contains(t, inventory(t, got[protocol.ClientRegister].Metadata), "action::extra_1")
}

// inventory reads the tool keys of the system_info in metadata.
func inventory(t *testing.T, md map[string]any) []string {
	t.Helper()
	info, ok := md[protocol.MetadataSystemInfo].(map[string]any)
	require.True(t, ok, "metadata has system_info: %v", md)
	var keys []string
	for _, ti := range info["tools"].([]any) {
		keys = append(keys, ti.(map[string]any)["tool_key"].(string))
	}
	return keys
}

func TestAnAgentNameWithNoConfigIsAnsweredNotLeftWaiting(t *testing.T) {
	p := newTestPeer(t)
	startAgent(t, agentConfig(t, p.url()))
	l := p.next(t)
	m := newCommand("s1", action("echo", nil))
	m.AgentName, m.RootName = "HostAgent", "EXCEL.EXE"
	l.send(t, m)
	res := l.results(t, m.ResponseID)
	assert.Equal(t, fmt.Sprintf("agent_name %q has no configuration on this device", "HostAgent"), res[0].Error)
}

func TestACommandThatComesBeforeTheRegisterAckIsRun(t *testing.T) {
	p := newTestPeer(t)
	m := newCommand("s1", action("count", nil))
	p.early.Store(m)
	startAgent(t, agentConfig(t, p.url()))
	l := p.next(t)
	assert.EqualValues(t, 1, calls(t, l.results(t, m.ResponseID)))
}

func TestADeadLinkIsNoticedByItsPingsAndReplaced(t *testing.T) {
	p := newTestPeer(t)
	cfg := agentConfig(t, p.url())
	cfg.Conn.PingInterval, cfg.HeartbeatInterval = 200*time.Millisecond, 20*time.Millisecond
	ta := startAgent(t, cfg)
	l := p.next(t)
	l.stalled.Store(true) // the TCP connection stays open; nothing answers
	l2 := p.next(t)
	assert.True(t, ta.logs.Contains("link dead: ping unanswered"))
	m := newCommand("s1", action("count", nil))
	l2.send(t, m)
	assert.EqualValues(t, 1, calls(t, l2.results(t, m.ResponseID)))
}

func TestResultsRecordedUnderALargerFrameCapGoOutAsFailuresAndHoldUpNothing(t *testing.T) {
	p := newTestPeer(t)
	cfg := agentConfig(t, p.url())
	// Recorded by an agent whose frame cap was larger.
	ob := openJournal(t, cfg)
	big, small := outboxtest.Results("big", strings.Repeat("x", 100_000)), outboxtest.Results("small", "y")
	for _, m := range []*protocol.ClientMessage{big, small} {
		ob.Admit(m.PrevResponseID)
		require.NoError(t, ob.Accept(outboxtest.Command(m.PrevResponseID)))
		r, err := reply.Encode(m, protocol.CBOR, logtest.Quiet)
		require.NoError(t, err)
		require.NoError(t, ob.Complete(r))
	}
	ob.Close()

	cfg.Conn.MaxFrameBytes = 64 << 10
	startAgent(t, cfg)
	l := p.next(t)
	got := map[string]protocol.ClientMessage{}
	for range 2 {
		m := l.next(t)
		got[m.PrevResponseID] = m
	}
	assert.Equal(t, small.ActionResults, got["small"].ActionResults, "not held up by the results that cannot go out")
	require.Len(t, got["big"].ActionResults, 2)
	for _, r := range got["big"].ActionResults {
		assert.Equal(t, protocol.ResultFailure, r.Status)
		assert.Regexp(t, `^results of 100\d{3} bytes exceed the link's frame cap of 65536 bytes$`, r.Error)
	}
	assert.Equal(t, big.RequestID, got["big"].RequestID, "they answer the same results message")
}

func TestALinkClosedRightAfterRegistrationDoesNotResetTheBackoff(t *testing.T) {
	p := newTestPeer(t)
	p.hangUp.Store(true)
	ta := startAgent(t, agentConfig(t, p.url()))
	for range 3 {
		p.next(t)
	}
	require.Eventually(t, func() bool { return ta.logs.Contains("attempt=3") }, 10*time.Second, 5*time.Millisecond,
		"each short-lived link counts as another failed attempt")
}

// waitAccepted waits until the agent of cfg has recorded command m as
// accepted in its outbox: from then on m is in flight, and a shutdown
// gives it its grace. The agent logs "command received" before that; a
// shutdown that begins in between does not take m (it is not started,
// and the server sends it again), so that log line is no sign that m is
// in flight.
func waitAccepted(t *testing.T, cfg Config, m *protocol.ServerMessage) {
	t.Helper()
	journal := filepath.Join(cfg.DataDir, "outbox", cfg.ID+".journal")
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(journal)
		return err == nil && bytes.Contains(b, []byte(m.ResponseID))
	}, testenv.Slowdown*20*time.Second, 5*time.Millisecond, "command %s never recorded as accepted in %s", m.ResponseID, journal)
}

// openJournal opens the outbox of the agent cfg configures, as an agent
// that ran before would have.
func openJournal(t *testing.T, cfg Config) *outbox.Outbox {
	t.Helper()
	ob, _, err := outbox.Open(filepath.Join(cfg.DataDir, "outbox", cfg.ID+".journal"), outbox.OSFS{}, protocol.CBOR,
		config.OutboxLimits{MaxBytes: 1 << 20, MaxAge: time.Hour}, logtest.Quiet)
	require.NoError(t, err)
	return ob
}
