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

// fixture reads a tool module from testdata/tools.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "tools", name+".wasm"))
	require.NoError(t, err)
	return b
}

func newSandbox(t testing.TB, cfg Config) *Sandbox {
	t.Helper()
	ctx := context.Background()
	sb, err := New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { sb.Close(ctx) })
	return sb
}

func load(t testing.TB, sb *Sandbox, name string, l Limits) *Tool {
	t.Helper()
	return loadSpec(t, sb, Spec{Name: name, Wasm: fixture(t, name), Limits: l})
}

func loadSpec(t testing.TB, sb *Sandbox, spec Spec) *Tool {
	t.Helper()
	tool, err := sb.Load(context.Background(), spec)
	require.NoError(t, err)
	return tool
}

func TestCallPassesParamsOnStdinAndReturnsStdout(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	res := sb.Call(context.Background(), load(t, sb, "echo", Limits{}), []byte(`{"a":1}`))
	require.NoError(t, res.Err)
	assert.Equal(t, `{"a":1}`, string(res.Stdout))
	assert.Equal(t, int64(7), res.Usage.StdoutBytes)
	assert.Equal(t, uint32(1), res.Usage.MemoryPages)
}

func TestEachCallGetsAFreshInstance(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	tool := load(t, sb, "counter", Limits{})
	for range 3 {
		res := sb.Call(context.Background(), tool, nil)
		require.NoError(t, res.Err)
		assert.Equal(t, "1 1", string(res.Stdout), "globals and memory start afresh")
	}
}

func TestNonZeroExitCarriesStderrTail(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	res := sb.Call(context.Background(), load(t, sb, "fail", Limits{}), nil)
	require.ErrorIs(t, res.Err, ErrExit)
	assert.EqualError(t, res.Err, `tool "fail": exited with status 3: disk on fire`)
	assert.Nil(t, res.Stdout)
}

func TestTrapIsAFailureNotAPanic(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	res := sb.Call(context.Background(), load(t, sb, "trap", Limits{}), nil)
	require.ErrorIs(t, res.Err, ErrTrap)
	assert.Contains(t, res.Err.Error(), "unreachable")
	assert.Positive(t, res.Usage.Fuel, "a trap still reports the fuel it burned")
}

// Closing the sandbox ends the calls under way, canceled, and returns only
// once they have: their memory is freed with their tools, never from under
// a running call (which, unmapped, crashed the process).
func TestCloseEndsTheCallsUnderWayAndWaitsForThem(t *testing.T) {
	ctx := context.Background()
	sb, err := New(ctx, NewConfig())
	require.NoError(t, err)
	tool := load(t, sb, "spin", Limits{Timeout: time.Minute, Fuel: 1 << 60})
	warm, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, sb.Call(warm, tool, nil).Err, ErrTimeout, "compiled by a first call")

	ended := make(chan Result, 1)
	go func() { ended <- sb.Call(ctx, tool, nil) }()
	require.Eventually(t, tool.awaited, 10*time.Second, time.Millisecond)
	require.NoError(t, sb.Close(ctx))
	select {
	case res := <-ended:
		assert.ErrorIs(t, res.Err, ErrClosed, "the call says why it ended")
	default:
		t.Fatal("Close returned while a call was under way")
	}
	assert.ErrorIs(t, sb.Call(ctx, tool, nil).Err, ErrClosed, "and no call starts after")
}

func TestSpinningToolIsStoppedByItsTimeout(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	res := sb.Call(context.Background(), load(t, sb, "spin", Limits{Timeout: 200 * time.Millisecond}), nil)
	require.ErrorIs(t, res.Err, ErrTimeout)
	assert.EqualError(t, res.Err, `tool "spin": timed out after 200ms`)
}

func TestMemoryBombHitsItsLimit(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	res := sb.Call(context.Background(), load(t, sb, "membomb", Limits{MemoryPages: 64}), nil)
	require.ErrorIs(t, res.Err, ErrMemory)
	assert.Contains(t, res.Err.Error(), "memory limit reached (64 pages)")
	assert.LessOrEqual(t, res.Usage.MemoryPages, uint32(64))
}

func TestToolLimitCannotRaiseTheSandboxCeiling(t *testing.T) {
	sb := newSandbox(t, NewConfig().WithLimits(Limits{MemoryPages: 32}))
	res := sb.Call(context.Background(), load(t, sb, "membomb", Limits{MemoryPages: 4096}), nil)
	require.ErrorIs(t, res.Err, ErrMemory)
	assert.Contains(t, res.Err.Error(), "(32 pages)")
}

func TestOutputFloodIsCutOff(t *testing.T) {
	forms(t, func(t *testing.T) {
		sb := newSandbox(t, NewConfig())
		tool := loadSpec(t, sb, Spec{Name: "flood", Wasm: formFixture(t, "flood"), Limits: Limits{StdoutBytes: 100_000, Timeout: 10 * time.Second}})
		res := sb.Call(context.Background(), tool, nil)
		require.ErrorIs(t, res.Err, ErrOutputTooBig)
		assert.Contains(t, res.Err.Error(), "stdout exceeded 100000 bytes")
		assert.Equal(t, int64(100_000), res.Usage.StdoutBytes)
	})
}

func TestStderrFloodIsCutOff(t *testing.T) {
	forms(t, func(t *testing.T) {
		sb := newSandbox(t, NewConfig())
		tool := loadSpec(t, sb, Spec{Name: "errflood", Wasm: formFixture(t, "errflood"), Limits: Limits{StderrBytes: 10_000, Timeout: 10 * time.Second}})
		res := sb.Call(context.Background(), tool, nil)
		require.ErrorIs(t, res.Err, ErrOutputTooBig)
		assert.Contains(t, res.Err.Error(), "stderr exceeded 10000 bytes")
	})
}

func TestCallerCancellationStopsTheCall(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	res := sb.Call(ctx, load(t, sb, "spin", Limits{Timeout: time.Minute}), nil)
	require.ErrorIs(t, res.Err, ErrCanceled)
}

func TestLoadRefusesModulesOfNeitherForm(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	// (module (memory 1)) has no _start, nor aip_call.
	_, err := sb.Load(context.Background(), Spec{Name: "lib", Wasm: []byte("\x00asm\x01\x00\x00\x00\x05\x03\x01\x00\x01")})
	assert.EqualError(t, err, `tool "lib": not a tool module: it exports neither _start (a WASI command) nor aip_call (a reactor)`)
	_, err = sb.Load(context.Background(), Spec{Name: "junk", Wasm: []byte("not wasm")})
	assert.ErrorContains(t, err, `tool "junk": not a WebAssembly module`)
}

func TestParseMount(t *testing.T) {
	dir := t.TempDir()
	m, err := ParseMount(dir)
	require.NoError(t, err)
	assert.Equal(t, Mount{HostPath: dir, GuestPath: dir}, m)

	m, err = ParseMount(dir + ":/data:ro")
	require.NoError(t, err)
	assert.Equal(t, Mount{HostPath: dir, GuestPath: "/data", ReadOnly: true}, m)

	for spec, want := range map[string]string{
		"":                      "empty path",
		dir + ":rel":            "not absolute",
		dir + "/missing":        "no such file",
		dir + ":/a:/b:ro":       "want HOST[:GUEST][:ro]",
		filepath.Join(dir, "f"): "no such file",
	} {
		_, err := ParseMount(spec)
		assert.ErrorContains(t, err, want, spec)
	}
}
