package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCodeIsCompiledAtTheFirstCallAndDroppedWhenIdle(t *testing.T) {
	sb := newSandbox(t, NewConfig().WithUnloadAfter(50*time.Millisecond))
	ctx := context.Background()
	tool := load(t, sb, "echo", Limits{})
	assert.False(t, tool.loaded(), "loading compiles nothing")

	require.NoError(t, sb.Call(ctx, tool, []byte("one")).Err)
	assert.True(t, tool.loaded())
	require.Eventually(t, func() bool { return !tool.loaded() }, 10*time.Second, 10*time.Millisecond, "idle code is dropped")

	res := sb.Call(ctx, tool, []byte("two"))
	require.NoError(t, res.Err, "and compiled again when called")
	assert.Equal(t, "two", string(res.Stdout))
}

func TestCodeIsNotDroppedUnderARunningCall(t *testing.T) {
	sb := newSandbox(t, NewConfig().WithUnloadAfter(20*time.Millisecond))
	tool := load(t, sb, "spin", Limits{Timeout: time.Second})
	done := make(chan Result, 1)
	go func() { done <- sb.Call(context.Background(), tool, nil) }()
	require.Eventually(t, tool.loaded, 10*time.Second, time.Millisecond)
	time.Sleep(200 * time.Millisecond) // ten unload periods
	assert.True(t, tool.loaded(), "a running call keeps its code")
	assert.ErrorIs(t, (<-done).Err, ErrTimeout, "the call ran to its deadline")
}

func TestLoadStillRefusesWhatCouldNeverRun(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	ctx := context.Background()
	// (module (memory 2000) (func (export "_start"))).
	big := []byte("\x00asm\x01\x00\x00\x00\x01\x04\x01\x60\x00\x00\x03\x02\x01\x00\x05\x04\x01\x00\xd0\x0f\x07\x0a\x01\x06_start\x00\x00\x0a\x04\x01\x02\x00\x0b")
	_, err := sb.Load(ctx, Spec{Name: "big", Wasm: big})
	assert.ErrorContains(t, err, `tool "big": memory starts at 2000 pages, above the limit of 1024`)
}

func TestAToolWhoseCachedCopyVanishedIsInstrumentedAgainFromItsFile(t *testing.T) {
	cache := t.TempDir()
	sb := newSandbox(t, NewConfig().WithCacheDir(cache).WithUnloadAfter(20*time.Millisecond))
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "echo.wasm")
	require.NoError(t, os.WriteFile(path, fixture(t, "echo"), 0o600))
	tool, err := sb.Load(ctx, Spec{Name: "echo", Wasm: fixture(t, "echo"), Path: path})
	require.NoError(t, err)

	require.NoError(t, os.RemoveAll(cache), "someone clears the cache while the agent runs")
	res := sb.Call(ctx, tool, []byte("hi"))
	require.NoError(t, res.Err)
	assert.Equal(t, "hi", string(res.Stdout))

	require.Eventually(t, func() bool { return !tool.loaded() }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, os.RemoveAll(cache))
	require.NoError(t, os.WriteFile(path, []byte("\x00asm\x01\x00\x00\x00"), 0o600), "and the module file changes")
	res = sb.Call(ctx, tool, nil)
	assert.ErrorContains(t, res.Err, "no longer holds the module loaded")
}

func TestADamagedCompileCacheIsClearedAndTheToolCompiledAfresh(t *testing.T) {
	cache := t.TempDir()
	ctx := context.Background()
	first := newSandbox(t, NewConfig().WithCacheDir(cache))
	require.NoError(t, first.Call(ctx, load(t, first, "echo", Limits{}), nil).Err)
	require.NoError(t, first.Close(ctx))
	damaged := 0
	filepath.WalkDir(filepath.Join(cache, costModelDir, "compiled"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			// Bit rot in the machine code, which wazero's checksum
			// catches. (wazero trusts the lengths in an entry: damage
			// there can exhaust memory. The cache dir is the agent's
			// alone, mode 0700, and entries are written whole.)
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0xff
			os.WriteFile(p, b, 0o600)
			damaged++
		}
		return nil
	})
	require.Equal(t, 1, damaged)

	second := newSandbox(t, NewConfig().WithCacheDir(cache))
	res := second.Call(ctx, load(t, second, "echo", Limits{}), []byte("ok"))
	require.NoError(t, res.Err)
	assert.Equal(t, "ok", string(res.Stdout))
}
