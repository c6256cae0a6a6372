package mcpproxy

import (
	"context"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent/internal/logtest"
	"github.com/edgeaip/edgeaip/agent/internal/mcpproxy/mcptest"
	"github.com/edgeaip/edgeaip/agent/internal/reply"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { mcptest.Main(m) }

func newTestPool(t *testing.T) *Pool {
	p := NewPool(reply.Cap{Enc: protocol.CBOR, Max: protocol.DefaultMaxFrameBytes}, "test", logtest.Quiet, func() {})
	t.Cleanup(p.Close)
	return p
}

// published subscribes to s's tools under toolType and waits for the
// first list.
func published(t *testing.T, s *Server, toolType protocol.ToolType) (*Subscription, []*Tool) {
	t.Helper()
	got := make(chan []*Tool, 16)
	sub := s.Subscribe(toolType, func(tools []*Tool) { got <- tools })
	select {
	case tools := <-got:
		return sub, tools
	case <-time.After(testenv.Slowdown * 20 * time.Second):
		t.Fatal("the server never published its tools")
		return nil, nil
	}
}

func TestASubscriberGetsTheToolsUnderItsToolTypeAndCallsThem(t *testing.T) {
	s := newTestPool(t).Server(mcptest.Stdio(t, "helper"))
	_, tools := published(t, s, protocol.ToolDataCollection)
	var say *Tool
	for _, tl := range tools {
		assert.Equal(t, protocol.ToolDataCollection, tl.Info().ToolType)
		assert.Equal(t, "helper", tl.Info().Namespace)
		if tl.Info().ToolName == "say" {
			say = tl
		}
	}
	require.NotNil(t, say)
	assert.Equal(t, "data_collection::say", say.Info().ToolKey)
	assert.Equal(t, "hi", say.Call(context.Background(), map[string]any{"text": "hi"}).Result)
	assert.NoError(t, s.Down())
}

func TestACanceledSubscriptionIsForgottenAndAServerOfItsOwnStops(t *testing.T) {
	p := newTestPool(t)
	shared := p.Server(mcptest.Stdio(t, "ui"))
	assert.Same(t, shared, p.Server(mcptest.Stdio(t, "ui")), "one server per namespace")
	first, _ := published(t, shared, protocol.ToolAction)
	published(t, shared, protocol.ToolDataCollection)
	first.Cancel()
	shared.mu.Lock()
	assert.Len(t, shared.subs, 1, "the shared server forgot the canceled subscriber")
	shared.mu.Unlock()
	assert.NoError(t, shared.Down(), "and goes on")

	cfg := mcptest.Stdio(t, "excel")
	cfg.Reset = true
	own := p.Server(cfg)
	assert.NotSame(t, own, p.Server(cfg), "reset: a server for each")
	sub, _ := published(t, own, protocol.ToolAction)
	sub.Cancel()
	select {
	case <-own.stopped:
	default:
		t.Fatal("the server started for the subscriber alone did not stop")
	}
}

// A subscriber may call a tool as soon as it has it: the server is up by
// the time it publishes.
func TestAServerIsUpWhenItPublishesItsTools(t *testing.T) {
	s := newTestPool(t).Server(mcptest.Stdio(t, "helper"))
	downAtPublish := make(chan error, 16)
	s.Subscribe(protocol.ToolDataCollection, func([]*Tool) { downAtPublish <- s.Down() })
	select {
	case err := <-downAtPublish:
		assert.NoError(t, err)
	case <-time.After(testenv.Slowdown * 20 * time.Second):
		t.Fatal("the server never published its tools")
	}
}
