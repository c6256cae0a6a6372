package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// meteredCopy is where a sandbox on cache keeps the instrumented copy of
// wasm.
func meteredCopy(cache string, wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return filepath.Join(cache, costModelDir, "metered", hex.EncodeToString(sum[:])+".wasm")
}

func TestADamagedInstrumentedCopyIsMadeAgain(t *testing.T) {
	damages := []struct {
		name   string
		damage func(t *testing.T, good []byte) []byte
	}{
		{"truncated to half", func(t *testing.T, good []byte) []byte { return good[:len(good)/2] }},
		{"a byte flipped where it still parses", func(t *testing.T, good []byte) []byte {
			bad := bytes.Replace(good, []byte("disk on fire"), []byte("dusk on fire"), 1)
			require.NotEqual(t, good, bad, "the copy holds fail's message")
			return bad
		}},
	}
	for _, d := range damages {
		// A module loaded from a file is checked when it is compiled, and
		// made again from the file; one given only as bytes is checked at
		// Load, while its bytes are at hand.
		for _, from := range []string{"file", "bytes"} {
			t.Run(d.name+", module from "+from, func(t *testing.T) {
				ctx := context.Background()
				cache := t.TempDir()
				spec := Spec{Name: "fail", Wasm: fixture(t, "fail")}
				if from == "file" {
					spec.Path = filepath.Join("..", "testdata", "tools", "fail.wasm")
				}
				first := newSandbox(t, NewConfig().WithCacheDir(cache))
				require.NoError(t, loadSpec(t, first, spec).Ready(ctx))
				require.NoError(t, first.Close(ctx))
				path := meteredCopy(cache, spec.Wasm)
				good, err := os.ReadFile(path)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(path, d.damage(t, good), 0o600))

				// Two restarts: the first mends the cache, the second finds it
				// mended.
				for range 2 {
					sb := newSandbox(t, NewConfig().WithCacheDir(cache))
					tool := loadSpec(t, sb, spec)
					require.NoError(t, tool.Ready(ctx))
					res := sb.Call(ctx, tool, nil)
					assert.EqualError(t, res.Err, `tool "fail": exited with status 3: disk on fire`)
					require.NoError(t, sb.Close(ctx))
					got, err := os.ReadFile(path)
					require.NoError(t, err)
					assert.Equal(t, good, got, "the damaged copy was replaced by a good one")
				}
			})
		}
	}
}

func TestTheCachesOfOtherCostModelsAreRemovedAtStart(t *testing.T) {
	cache := t.TempDir()
	retired := filepath.Join(cache, "cost-model-fuel-1")
	require.NoError(t, os.MkdirAll(filepath.Join(retired, "metered"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(retired, "metered", "x.wasm"), []byte("old"), 0o600))
	notOurs := []string{filepath.Join(cache, "models"), filepath.Join(cache, "cost-model-notes.txt")}
	require.NoError(t, os.Mkdir(notOurs[0], 0o700))
	require.NoError(t, os.WriteFile(notOurs[1], []byte("a file, not a cache"), 0o600))

	newSandbox(t, NewConfig().WithCacheDir(cache))
	assert.NoDirExists(t, retired)
	assert.DirExists(t, filepath.Join(cache, costModelDir))
	assert.DirExists(t, notOurs[0], "only cost-model directories are removed")
	assert.FileExists(t, notOurs[1], "only cost-model directories are removed")
}

func TestPruneCacheRemovesWhatNoLoadedToolUses(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	sb := newSandbox(t, NewConfig().WithCacheDir(cache))
	call := func(tool *Tool) {
		t.Helper()
		sb.Call(ctx, tool, nil) // fail fails; what matters is that it was compiled
		require.True(t, tool.loaded(), tool.Name())
	}
	replaced := load(t, sb, "echo", Limits{})
	kept := load(t, sb, "fail", Limits{})
	call(replaced)
	call(kept)
	replacement := load(t, sb, "counter", Limits{})
	call(replacement)
	sameModule := load(t, sb, "env", Limits{})
	call(sameModule)
	sameModuleAgain := load(t, sb, "env", Limits{})
	require.Len(t, sb.compiledFiles(), 4, "one compiled entry per module")
	echoCode := sb.compiledRecord(replaced.SHA256())
	require.Len(t, echoCode, 1, "compiling echo recorded its entry")
	leftover := filepath.Join(cache, costModelDir, "metered", ".tmp-"+replaced.SHA256()+".wasm-123")
	require.NoError(t, os.WriteFile(leftover, []byte("half"), 0o600))

	require.NoError(t, replaced.Close(ctx))
	require.NoError(t, sameModule.Close(ctx))
	require.NoError(t, sb.PruneCache())

	assert.NoFileExists(t, meteredCopy(cache, fixture(t, "echo")), "the replaced module's instrumented copy")
	assert.NoFileExists(t, sb.compiledRecordPath(replaced.SHA256()))
	assert.NoFileExists(t, filepath.Join(cache, costModelDir, "compiled", echoCode[0]), "the replaced module's compiled code")
	assert.NoFileExists(t, leftover)
	for _, tool := range []*Tool{kept, replacement, sameModuleAgain} {
		assert.FileExists(t, meteredCopy(cache, fixture(t, tool.Name())), tool.Name())
		for _, f := range sb.compiledRecord(tool.SHA256()) {
			assert.FileExists(t, filepath.Join(cache, costModelDir, "compiled", f), tool.Name())
		}
	}
	assert.Len(t, sb.compiledFiles(), 3)
	res := sb.Call(ctx, sameModuleAgain, nil)
	assert.NoError(t, res.Err, "a tool whose module another, closed, tool shared still runs")
}

// An agent prunes its cache at start, while snapshot tools are being
// initialized, which compiles them: PruneCache does not wait for that
// compile, and the compiled code goes when the compile ends.
func TestPruneCacheDoesNotWaitForACompileUnderWay(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	sb := newSandbox(t, NewConfig().WithCacheDir(cache))
	replaced := load(t, sb, "echo", Limits{})
	require.NoError(t, sb.Call(ctx, replaced, nil).Err)
	echoCode := sb.compiledRecord(replaced.SHA256())
	require.Len(t, echoCode, 1)
	require.NoError(t, replaced.Close(ctx))
	kept := load(t, sb, "counter", Limits{})

	sb.compileMu.Lock() // a compile under way
	done := make(chan error, 1)
	go func() { done <- sb.PruneCache() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("PruneCache waited for the compile")
	}
	assert.NoFileExists(t, meteredCopy(cache, fixture(t, "echo")), "instrumented copies go at once")
	assert.FileExists(t, filepath.Join(cache, costModelDir, "compiled", echoCode[0]), "compiled code waits for the compile")
	sb.compileMu.Unlock()

	require.NoError(t, sb.Call(ctx, kept, nil).Err) // compiles
	assert.NoFileExists(t, filepath.Join(cache, costModelDir, "compiled", echoCode[0]), "swept when the compile ended")
	assert.Len(t, sb.compiledFiles(), 1, "counter's code stays")
}
