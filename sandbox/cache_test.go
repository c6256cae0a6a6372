package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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

// loadFile loads the fixture name from a copy at path, as an agent loads
// a tool from its file, and calls it once, which compiles it.
func loadFile(t *testing.T, sb *Sandbox, name, path string) *Tool {
	t.Helper()
	wasm := fixture(t, name)
	require.NoError(t, os.WriteFile(path, wasm, 0o644))
	tool := loadSpec(t, sb, Spec{Name: name, Wasm: wasm, Path: path})
	sb.Call(context.Background(), tool, nil) // fail fails; what matters is that it was compiled
	require.True(t, tool.loaded(), name)
	return tool
}

// cacheLog is a sandbox's log, for the reasons of its removals.
func cacheLog(cfg Config) (Config, *bytes.Buffer) {
	var buf bytes.Buffer
	return cfg.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))), &buf
}

// assertEntry checks whether the cache holds the entry of tool: its
// instrumented copy, and its compiled code.
func assertEntry(t *testing.T, cache string, tool *Tool, code []string, held bool) {
	t.Helper()
	check := assert.NoFileExists
	if held {
		check = assert.FileExists
	}
	require.NotEmpty(t, code, tool.Name())
	check(t, meteredCopy(cache, fixture(t, tool.Name())), tool.Name())
	for _, f := range code {
		check(t, filepath.Join(cache, costModelDir, "compiled", f), tool.Name())
	}
}

// Issue 38: the cache removes only what it has reason to: a module whose
// file is gone (removed, or replaced by another module), and files a
// crash left. A module no tool loads now whose file still holds it (a
// tool this start refused) keeps its entry, as does one loaded without a
// file; each removal is logged with its reason.
func TestPruneCacheRemovesOnlyWhatItHasReasonTo(t *testing.T) {
	ctx := context.Background()
	cache, dir := t.TempDir(), t.TempDir()
	cfg, log := cacheLog(NewConfig().WithCacheDir(cache))
	sb := newSandbox(t, cfg)
	replaced := loadFile(t, sb, "echo", filepath.Join(dir, "a.wasm"))
	replacedCode := sb.compiledRecord(replaced.SHA256())
	replacement := loadFile(t, sb, "counter", filepath.Join(dir, "a.wasm"))
	gone := loadFile(t, sb, "fail", filepath.Join(dir, "b.wasm"))
	goneCode := sb.compiledRecord(gone.SHA256())
	refused := loadFile(t, sb, "env", filepath.Join(dir, "c.wasm"))
	refusedCode := sb.compiledRecord(refused.SHA256())
	fromBytes := load(t, sb, "trap", Limits{})
	sb.Call(ctx, fromBytes, nil)
	fromBytesCode := sb.compiledRecord(fromBytes.SHA256())
	for _, tool := range []*Tool{replaced, gone, refused, fromBytes} {
		require.NoError(t, tool.Close(ctx))
	}
	require.NoError(t, os.Remove(filepath.Join(dir, "b.wasm")))
	leftover := filepath.Join(cache, costModelDir, "metered", ".tmp-"+replaced.SHA256()+".wasm-123")
	require.NoError(t, os.WriteFile(leftover, []byte("half"), 0o600))

	require.NoError(t, sb.PruneCache())
	assertEntry(t, cache, replaced, replacedCode, false)
	assertEntry(t, cache, gone, goneCode, false)
	assertEntry(t, cache, refused, refusedCode, true)
	assertEntry(t, cache, fromBytes, fromBytesCode, true)
	assertEntry(t, cache, replacement, sb.compiledRecord(replacement.SHA256()), true)
	assert.NoFileExists(t, leftover)
	assert.Len(t, sb.compiledFiles(), 3)
	for _, want := range []string{
		"module=" + replaced.SHA256() + " bytes=",
		`reason="its module file is gone: ` + filepath.Join(dir, "a.wasm") + ` no longer holds it"`,
		"module=" + gone.SHA256(),
		`reason="its module file is gone: ` + filepath.Join(dir, "b.wasm") + ` no longer holds it"`,
		`msg="compile cache: file removed" file=` + leftover + ` reason="left half written (a crash while it was written)"`,
	} {
		assert.Contains(t, log.String(), want)
	}
	assert.Equal(t, 3, strings.Count(log.String(), "compile cache:"), "nothing else went:\n%s", log)
}

// Past the cache's max age an entry goes, and past its max bytes the
// entries loaded least recently go first, never those of tools loaded
// now.
func TestPruneCacheKeepsToTheCachesAgeAndSize(t *testing.T) {
	ctx := context.Background()
	cache, dir := t.TempDir(), t.TempDir()
	first := newSandbox(t, NewConfig().WithCacheDir(cache))
	old := loadFile(t, first, "echo", filepath.Join(dir, "echo.wasm"))
	older := loadFile(t, first, "fail", filepath.Join(dir, "fail.wasm"))
	recent := loadFile(t, first, "env", filepath.Join(dir, "env.wasm"))
	inUse := loadFile(t, first, "counter", filepath.Join(dir, "counter.wasm"))
	codes := map[*Tool][]string{}
	for tool, ago := range map[*Tool]time.Duration{old: 2 * time.Hour, older: 40 * time.Minute, recent: 10 * time.Minute, inUse: 3 * time.Hour} {
		codes[tool] = first.compiledRecord(tool.SHA256())
		when := time.Now().Add(-ago)
		for _, suffix := range []string{".wasm", ".compiled", ".source"} {
			require.NoError(t, os.Chtimes(filepath.Join(cache, costModelDir, "metered", tool.SHA256()+suffix), when, when))
		}
	}
	entries, _, err := first.cacheEntries()
	require.NoError(t, err)
	var total int64
	for _, e := range entries {
		total += e.bytes
	}
	require.NoError(t, first.Close(ctx))

	// Room for all but one entry of those left once old has aged out.
	sb := newSandbox(t, NewConfig().WithCacheDir(cache).WithCacheLimits(time.Hour, total-entryBytes(t, entries, old)-1))
	loadSpec(t, sb, Spec{Name: "counter", Wasm: fixture(t, "counter"), Path: filepath.Join(dir, "counter.wasm")})
	require.NoError(t, sb.PruneCache())
	assertEntry(t, cache, old, codes[old], false)
	assertEntry(t, cache, older, codes[older], false)
	assertEntry(t, cache, recent, codes[recent], true)
	assertEntry(t, cache, inUse, codes[inUse], true)
}

// entryBytes is the size of tool's entry among entries.
func entryBytes(t *testing.T, entries []*cacheEntry, tool *Tool) int64 {
	t.Helper()
	for _, e := range entries {
		if e.sum == tool.SHA256() {
			return e.bytes
		}
	}
	t.Fatalf("no cache entry for %s", tool.Name())
	return 0
}

// An agent prunes its cache at start, while snapshot tools are being
// initialized, which compiles them: PruneCache does not wait for that
// compile, and compiled code that no entry records goes when the compile
// ends (the code of entries it removes goes at once: a compile never
// writes it).
func TestPruneCacheDoesNotWaitForACompileUnderWay(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	sb := newSandbox(t, NewConfig().WithCacheDir(cache))
	unrecorded := load(t, sb, "echo", Limits{})
	require.NoError(t, sb.Call(ctx, unrecorded, nil).Err)
	echoCode := sb.compiledRecord(unrecorded.SHA256())
	require.Len(t, echoCode, 1)
	require.NoError(t, os.Remove(sb.compiledRecordPath(unrecorded.SHA256())), "its record is lost")
	require.NoError(t, unrecorded.Close(ctx))
	kept := load(t, sb, "counter", Limits{})

	compiled, err := sb.compiles.enter(ctx, prepareLane) // a compile under way
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- sb.PruneCache() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("PruneCache waited for the compile")
	}
	assert.FileExists(t, filepath.Join(cache, costModelDir, "compiled", echoCode[0]), "unrecorded code waits for the compile")
	compiled()

	require.NoError(t, sb.Call(ctx, kept, nil).Err) // compiles
	assert.NoFileExists(t, filepath.Join(cache, costModelDir, "compiled", echoCode[0]), "swept when the compile ended")
	assert.Len(t, sb.compiledFiles(), 1, "counter's code stays")
}
