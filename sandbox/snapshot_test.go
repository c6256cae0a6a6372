package sandbox

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loadReady loads spec and waits for it to be ready.
func loadReady(t *testing.T, sb *Sandbox, spec Spec) *Tool {
	t.Helper()
	tool := loadSpec(t, sb, spec)
	require.NoError(t, tool.Ready(context.Background()))
	return tool
}

// state loads reactor/state, which prints the state its calls start from,
// with a granted dir it leaves a file open in.
func state(t *testing.T, sb *Sandbox, init manifest.Init) *Tool {
	t.Helper()
	dir := t.TempDir()
	return loadReady(t, sb, Spec{Name: "state", Wasm: fixture(t, "reactor/state"), Init: init,
		Mounts: []Mount{{HostPath: dir, GuestPath: "/data"}}})
}

// A reactor starts from a snapshot unless its manifest says otherwise.
// Each call sees the state initialization left: not the byte, the global,
// the memory size or the open file an earlier call changed.
func TestACallFromASnapshotSeesNothingOfAnEarlierCall(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	tool := state(t, sb, "")
	require.Equal(t, StartSnapshot, tool.Start())
	for range 3 {
		res := sb.Call(context.Background(), tool, []byte(`{}`))
		require.NoError(t, res.Err)
		assert.Equal(t, "AAC1", string(res.Stdout), "memory 'A', global 'A', fd 4 closed, 1 page")
	}
	init := tool.Initialization()
	assert.Positive(t, init.Usage.Fuel, "initialization ran once, and says what it took")
	assert.Equal(t, uint32(1), init.Usage.MemoryPages)
	assert.NoError(t, init.Fallback)
}

func TestATrapOrAnExitLeavesTheSnapshotIntact(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	tool := state(t, sb, "")
	res := sb.Call(context.Background(), tool, []byte(`t`))
	require.ErrorIs(t, res.Err, ErrTrap)
	assert.Contains(t, res.Err.Error(), "unreachable")
	res = sb.Call(context.Background(), tool, []byte(`x`))
	assert.EqualError(t, res.Err, `tool "state": exited with status 3`)
	res = sb.Call(context.Background(), tool, []byte(`{}`))
	require.NoError(t, res.Err)
	assert.Equal(t, "AAC1", string(res.Stdout), "what the failed calls changed is gone")
}

// Calls run at once from one snapshot, each in its own copy-on-write
// mapping of it: none sees another's writes.
func TestConcurrentCallsFromOneSnapshotAreApart(t *testing.T) {
	sb := newSandbox(t, NewConfig().WithMaxConcurrentCalls(8))
	tool := state(t, sb, "")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				res := sb.Call(context.Background(), tool, []byte(`{}`))
				assert.NoError(t, res.Err)
				assert.Equal(t, "AAC1", string(res.Stdout))
			}
		})
	}
	wg.Wait()
}

// A call from the snapshot does the work a plain start does after it
// initializes, and so costs exactly the plain start's fuel less the
// initialization's, which is counted once at load. A Go tool's runtime
// reads the clocks, so its count is exact with reproducible clocks, which
// carry on from where initialization left them; with the real clocks it
// differs by a few thousand units from run to run, as it always did.
func TestACallFromASnapshotCostsAPlainStartLessInitialization(t *testing.T) {
	ctx := context.Background()
	c := filepath.Join(testenv.Root(), "wasmtools", "examples", "c", "dir_usage", "dir_usage.wasm")
	goTool := testenv.GoTool(t)
	data := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(data, "f"), []byte("1234"), 0o644))
	for name, tc := range map[string]struct {
		wasm   []byte
		params string
	}{
		"wat": {fixture(t, "reactor/state"), `{"some": "parameters to sum"}`},
		"C":   {readFile(t, c), `{"path": "/data"}`},
		"Go":  {readFile(t, goTool), `{"path": "/data/f"}`},
	} {
		t.Run(name, func(t *testing.T) {
			sb := newSandbox(t, NewConfig().WithReproducible(true).WithCacheDir(goCache()))
			spec := Spec{Name: "t", Wasm: tc.wasm, Mounts: []Mount{{HostPath: data, GuestPath: "/data", ReadOnly: true}}}
			snap := loadReady(t, sb, spec)
			spec.Init = manifest.InitPlain
			plain := loadReady(t, sb, spec)
			require.Equal(t, StartPlain, plain.Start())

			fromSnapshot := sb.Call(ctx, snap, []byte(tc.params))
			require.NoError(t, fromSnapshot.Err)
			plainly := sb.Call(ctx, plain, []byte(tc.params))
			require.NoError(t, plainly.Err)
			assert.Equal(t, string(plainly.Stdout), string(fromSnapshot.Stdout))
			init := snap.Initialization().Usage.Fuel
			require.Positive(t, init)
			assert.Equal(t, plainly.Usage.Fuel-init, fromSnapshot.Usage.Fuel)
		})
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// Initialization has the tool's limits, counted for it alone: one that
// grows memory past the limit, or never ends, is refused when the tool is
// loaded, saying why, and never gets a call.
func TestAHostileInitializationIsRefusedAtLoad(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	ctx := context.Background()
	for name, tc := range map[string]struct {
		fixture string
		limits  Limits
		want    string
	}{
		"memory":   {"initgrow", Limits{MemoryPages: 64}, `tool "initgrow": module refused: initialization: memory limit reached (64 pages): trapped: wasm error: unreachable`},
		"fuel":     {"initspin", Limits{Fuel: 1_000_000, Timeout: time.Minute}, `tool "initspin": module refused: initialization: out of fuel after`},
		"deadline": {"initspin", Limits{Timeout: 300 * time.Millisecond}, `tool "initspin": module refused: initialization: timed out after 300ms`},
	} {
		t.Run(name, func(t *testing.T) {
			tool := loadSpec(t, sb, Spec{Name: tc.fixture, Wasm: fixture(t, "reactor/"+tc.fixture), Limits: tc.limits})
			began := time.Now()
			err := tool.Ready(ctx)
			require.ErrorIs(t, err, ErrRefused)
			assert.ErrorContains(t, err, tc.want)
			assert.Less(t, time.Since(began), 30*time.Second)
			res := sb.Call(ctx, tool, nil)
			assert.ErrorIs(t, res.Err, ErrRefused, "and its calls fail the same way")
		})
	}
}

// An initialization that reads stdin, opens a file or writes stdout
// cannot be snapshotted: the snapshot would freeze what it read, or lose
// what it wrote. It is refused, or, if its manifest allows, starts every
// call plainly.
func TestAnInitializationThatDoesIOCannotBeSnapshotted(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	spec := Spec{Name: "initio", Wasm: fixture(t, "reactor/initio"), Mounts: []Mount{{HostPath: t.TempDir(), GuestPath: "/data"}}}
	tool := loadSpec(t, sb, spec)
	err := tool.Ready(context.Background())
	require.ErrorIs(t, err, ErrRefused)
	require.ErrorIs(t, err, ErrNotSnapshottable)
	assert.EqualError(t, err, `tool "initio": module refused: initialization: cannot be started from a snapshot: `+
		`read stdin, which holds a call's parameters, not yet there; called path_open "config.json"; wrote to stdout, which no call would return`)

	spec.Init = manifest.InitSnapshotOrPlain
	tool = loadReady(t, sb, spec)
	assert.Equal(t, StartPlain, tool.Start())
	assert.ErrorIs(t, tool.Initialization().Fallback, ErrNotSnapshottable)
	res := sb.Call(context.Background(), tool, nil)
	require.NoError(t, res.Err)
	assert.Equal(t, "ready\n", string(res.Stdout), "each call initializes afresh")
}

// A module the meter cannot put in the snapshot form (it changes a table)
// is refused, or starts plainly if its manifest allows, saying why.
func TestAModuleTheSnapshotFormCannotHoldStartsPlainlyOrIsRefused(t *testing.T) {
	for _, cache := range []string{"", t.TempDir()} {
		sb := newSandbox(t, NewConfig().WithCacheDir(cache))
		spec := Spec{Name: "table", Wasm: fixture(t, "reactor/table")}
		err := loadSpec(t, sb, spec).Ready(context.Background())
		require.ErrorIs(t, err, ErrNotSnapshottable)
		assert.ErrorContains(t, err, "initialization: cannot be started from a snapshot: function 2: table.set changes a table")

		spec.Init = manifest.InitSnapshotOrPlain
		tool := loadReady(t, sb, spec)
		assert.Equal(t, StartPlain, tool.Start())
		assert.ErrorContains(t, tool.Initialization().Fallback, "table.set changes a table", "from the cache too (%q)", cache)
		res := sb.Call(context.Background(), tool, nil)
		require.NoError(t, res.Err)
		assert.Equal(t, "ok", string(res.Stdout))
	}
}

func TestACommandCannotAskForASnapshot(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	_, err := sb.Load(context.Background(), Spec{Name: "echo", Wasm: fixture(t, "echo"), Init: manifest.InitSnapshot})
	assert.EqualError(t, err, `tool "echo": init "snapshot": a WASI command (it exports _start) cannot be snapshotted; `+
		`the reactor form exports aip_call (Go: build with -buildmode=c-shared and wasmtools/sdk/reactor)`)
	tool := loadReady(t, sb, Spec{Name: "echo", Wasm: fixture(t, "echo"), Init: manifest.InitPlain})
	assert.Equal(t, StartCommand, tool.Start())
}

// The Go runtime seeds its random state while it initializes; the reactor
// SDK seeds it anew before each call. Two calls from one snapshot draw
// different numbers from math/rand/v2 and crypto/rand, and iterate a map
// in different orders.
func TestCallsOfAGoToolFromOneSnapshotDrawDifferentRandomNumbers(t *testing.T) {
	sb := newSandbox(t, NewConfig().WithCacheDir(goCache()))
	tool := loadReady(t, sb, Spec{Name: "gorand", Wasm: readFile(t, testenv.GoFixture(t, "gorand"))})
	require.Equal(t, StartSnapshot, tool.Start())
	seen := map[string]map[string]bool{}
	for range 4 {
		res := sb.Call(context.Background(), tool, []byte(`{}`))
		require.NoError(t, res.Err)
		var out map[string]any
		require.NoError(t, json.Unmarshal(res.Stdout, &out))
		for k, v := range out {
			b, _ := json.Marshal(v)
			if seen[k] == nil {
				seen[k] = map[string]bool{}
			}
			seen[k][string(b)] = true
		}
	}
	assert.Len(t, seen["math_rand"], 4, "math/rand/v2 draws anew in each call")
	assert.Len(t, seen["crypto_rand"], 4, "so does crypto/rand")
	assert.Greater(t, len(seen["map_order"]), 1, "maps iterate in a new order")
}

// goCache is a compile cache the Go tools of these tests share, across
// runs: compiling one from scratch takes seconds.
func goCache() string { return filepath.Join(os.TempDir(), "edgeaip-agent-test-cache") }

// A closed tool's snapshot is freed once its last call ends; a call that
// started from it runs to its end.
func TestAClosedSnapshotToolFreesItsImageAfterItsLastCall(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	tool := state(t, sb, "")
	im := tool.snap.image
	require.NoError(t, tool.Close(context.Background()))
	assert.ErrorIs(t, im.mapOnto(make([]byte, im.size)), errImageFreed)
	assert.ErrorIs(t, sb.Call(context.Background(), tool, nil).Err, ErrUnloaded)
}
