package cluster

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A flood of drops is logged as its first few and then a count per
// window; drops after a quiet window are logged one by one again.
func TestDropsAreLoggedOneByOneThenCounted(t *testing.T) {
	var out testenv.LogBuffer
	d := &dropLog{log: slog.New(slog.NewTextHandler(&out, nil)), every: 200 * time.Millisecond, burst: 3}
	for range 1000 {
		d.dropped("cluster: message dropped")
	}
	assert.Equal(t, 3, strings.Count(out.String(), "message dropped"))
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "more=997") }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(250 * time.Millisecond)
	d.dropped("cluster: message dropped")
	assert.Equal(t, 4, strings.Count(out.String(), "message dropped"))
	assert.Equal(t, 1, strings.Count(out.String(), "more="))
}

// A flood of malformed messages on every subject a node hears neither
// stops it serving a well-formed command nor floods its log.
func TestAFloodOfMalformedMessagesIsNotAFloodOfLogLines(t *testing.T) {
	e := newEnv(t)
	a, log := e.joinLogged("a")
	b := e.mustJoin("b")
	served := serveCounting(t, a, "kiosk-1")
	require.NoError(t, a.OnLease(func(LeaseChange) {}))
	require.NoError(t, a.nc.Flush())
	junk := []byte(strings.Repeat("x", 1000))
	for range 5000 {
		publishRaw(t, b.nc, leaseSubject, junk)
		publishRaw(t, b.nc, deviceSubject("kiosk-1"), junk)
	}
	require.NoError(t, b.nc.Flush())
	r, err := b.SendCommand(context.Background(), wellFormed("kiosk-1", "b"))
	require.NoError(t, err)
	assert.Equal(t, Sent, r.Outcome)
	assert.Equal(t, int32(1), served.Load())
	assert.LessOrEqual(t, strings.Count(log.String(), "\n"), dropLogBurst+5, "%s", log.String())
}
