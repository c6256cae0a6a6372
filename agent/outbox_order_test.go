package agent

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/agent/internal/outbox/outboxtest"
	"github.com/edgeaip/edgeaip/internal/testenv"
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

func TestACommandIsOnDiskBeforeItRunsAndItsResultsAreWrittenBeforeTheyGoOut(t *testing.T) {
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
	assert.True(t, outboxtest.Between(log, "tool", "write R "+m.ResponseID, "received"), "the results are written before they go out: %q", log)
}

// Results go out while the fsync of their record runs, and the server's
// ack counts (a D record) only once that fsync is done.
func TestResultsGoOutWhileTheirRecordIsFsyncedAndTheAckCountsOnceItIsOnDisk(t *testing.T) {
	p := newTestPeer(t)
	fs := &outboxtest.RecordingFS{}
	startAgentOn(t, agentConfig(t, p.url()), fs)
	l := p.next(t)

	m := newCommand("s1", action("echo", map[string]any{"msg": "hi"}))
	fs.Hold(t, "R "+m.ResponseID)
	l.send(t, m)
	assert.Equal(t, protocol.ResultSuccess, l.results(t, m.ResponseID)[0].Status, "they go out")
	<-fs.Held() // and their fsync waits still
	// The peer acked them before it passed them on; the link reads the
	// next COMMAND after that ack, and records it (A) then.
	m2 := newCommand("s2", action("echo", map[string]any{"msg": "next"}))
	l.send(t, m2)
	require.Eventually(t, func() bool { return slices.Contains(fs.Log(), "write A "+m2.ResponseID) },
		testenv.Slowdown*10*time.Second, 5*time.Millisecond, "the next command is taken")
	assert.NotContains(t, fs.Log(), "write D "+m.ResponseID, "the ack does not count while their record is not on disk")

	fs.Unhold()
	assert.Equal(t, protocol.ResultSuccess, l.results(t, m2.ResponseID)[0].Status)
	require.Eventually(t, func() bool { return slices.Contains(fs.Log(), "write D "+m.ResponseID) },
		testenv.Slowdown*10*time.Second, 5*time.Millisecond, "the ack counts once they are on disk")
	log := fs.Log()
	assert.True(t, outboxtest.Between(log, "write R "+m.ResponseID, "sync", "write D "+m.ResponseID), "%q", log)
}
