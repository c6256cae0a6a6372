package agent

import (
	"context"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/agent/internal/outbox/outboxtest"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// observedTool is a real tool whose calls are logged as "tool".
type observedTool struct {
	computer.Tool
	fs *outboxtest.RecordingFS
}

func (t *observedTool) Call(ctx context.Context, params map[string]any) protocol.Result {
	t.fs.Event("tool")
	return t.Tool.Call(ctx, params)
}

// observeEcho has the agent's fixtures.echo log its calls to fs.
func observeEcho(t *testing.T, a *Agent, fs *outboxtest.RecordingFS) {
	echo := a.computers.FindBase("fixtures", "echo")
	require.NotNil(t, echo)
	observed := &observedTool{Tool: echo, fs: fs}
	require.NoError(t, a.computers.CanSwapBase(echo, observed))
	a.computers.SwapBase(echo, observed)
}

func TestACommandIsOnDiskBeforeItRunsAndItsResultsBeforeTheyGoOut(t *testing.T) {
	p := newTestPeer(t)
	fs := &outboxtest.RecordingFS{}
	ta := startAgentOn(t, agentConfig(t, p.url()), fs)
	observeEcho(t, ta.Agent, fs)
	l := p.next(t)

	m := newCommand("s1", action("echo", map[string]any{"msg": "hi"}))
	l.send(t, m)
	res := l.results(t, m.ResponseID)
	require.Equal(t, protocol.ResultSuccess, res[0].Status, res[0].Error)
	fs.Event("received")

	log := fs.Log()
	assert.True(t, outboxtest.Between(log, "write A "+m.ResponseID, "sync", "tool"), "the accept record is fsynced before the tool runs: %q", log)
	assert.True(t, outboxtest.Between(log, "write R "+m.ResponseID, "sync", "received"), "the results are fsynced before they go out: %q", log)
}

func TestResultsDoNotGoOutBeforeTheirRecordIsOnDiskEvenOnANewLink(t *testing.T) {
	p := newTestPeer(t)
	fs := &outboxtest.RecordingFS{}
	startAgentOn(t, agentConfig(t, p.url()), fs)
	l := p.next(t)

	m := newCommand("s1", action("echo", map[string]any{"msg": "hi"}))
	fs.Hold(t, "R "+m.ResponseID)
	l.send(t, m)
	<-fs.Held() // the results are written, not yet fsynced
	l.conn.CloseNow()
	l2 := p.next(t) // a registration sends what is owed
	l2.quiet(t, 500*time.Millisecond)
	fs.Unhold()
	assert.Equal(t, protocol.ResultSuccess, l2.results(t, m.ResponseID)[0].Status, "they go out once on disk")
}
