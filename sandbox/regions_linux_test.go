//go:build linux

package sandbox

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every call of scribble grows its memory to the limit, exits 99 if any
// byte of it is not zero, then fills all of it and ends as told: returns,
// exits, traps or spins until its deadline. Whatever way each call ended,
// one after another or several at once, no call sees a byte another wrote.
func TestNoCallSeesWhatAnotherWroteHoweverItEnded(t *testing.T) {
	sb := newSandbox(t, NewConfig().WithMaxConcurrentCalls(8))
	l := Limits{MemoryPages: 40, Timeout: 300 * time.Millisecond}
	tools := map[string]*Tool{
		"command":  load(t, sb, "regions/scribble", l),
		"plain":    loadReady(t, sb, Spec{Name: "scribble", Wasm: fixture(t, "regions/reactor/scribble"), Limits: l, Init: manifest.InitPlain}),
		"snapshot": loadReady(t, sb, Spec{Name: "scribble", Wasm: fixture(t, "regions/reactor/scribble"), Limits: l}),
	}
	for name, tool := range tools {
		t.Run(name, func(t *testing.T) {
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					for i := range 12 {
						mode := strconv.Itoa((g + i) % 4)
						res := sb.Call(context.Background(), tool, []byte(mode))
						if mode == "0" {
							assert.NoError(t, res.Err, "call %d/%d (mode %s)", g, i, mode)
						} else if assert.Error(t, res.Err) {
							assert.NotContains(t, res.Err.Error(), "status 99", "call %d/%d (mode %s) saw another call's bytes", g, i, mode)
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// A tool whose module fails while wazero instantiates it (its start
// section traps), after wazero made its memory, never gets that memory
// back: wazero does not Free it, so the region is neither released to the
// image nor unmapped. Each call leaks what the start function wrote.
func TestAFailedInstantiationGivesItsMemoryBack(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	const pages, calls = 64, 16 // 4 MiB a call
	tool := load(t, sb, "regions/startleak", Limits{MemoryPages: pages})
	res := sb.Call(context.Background(), tool, nil)
	require.ErrorIs(t, res.Err, ErrTrap)
	before := rss(t)
	for range calls {
		res := sb.Call(context.Background(), tool, nil)
		require.ErrorIs(t, res.Err, ErrTrap)
	}
	grown := rss(t) - before
	assert.Less(t, grown, int64(pages*pageSize*calls/4),
		"%d failed calls of %d KiB each left %d KiB more resident", calls, pages*pageSize/1024, grown/1024)
}

// rss is the process's resident memory, in bytes.
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	require.NoError(t, err)
	f := strings.Fields(string(b))
	n, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err)
	return n * int64(os.Getpagesize())
}
