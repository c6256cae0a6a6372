package wasmtool

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.NewConfig().WithCacheDir(filepath.Join(os.TempDir(), "edgeaip-agent-test-cache")))
	require.NoError(t, err)
	t.Cleanup(func() { sb.Close(ctx) })
	return sb
}

func TestAToolLoadedFromItsFileIsCalledWithItsParameters(t *testing.T) {
	sb := newSandbox(t)
	tool, err := LoadFile(context.Background(), sb, filepath.Join(testenv.TestdataTools(), "echo.wasm"), sandbox.Policy{}, os.LookupEnv)
	require.NoError(t, err)
	assert.Equal(t, "echo", tool.Manifest().Name)

	res := tool.Call(context.Background(), map[string]any{"n": 1, "s": "x"})
	require.Equal(t, protocol.ResultSuccess, res.Status, res.Error)
	assert.Equal(t, map[string]any{"n": int64(1), "s": "x"}, res.Result, "stdout that is JSON is that JSON")
	require.NotNil(t, res.Usage)
	assert.Positive(t, res.Usage.Fuel)
	assert.Positive(t, res.Usage.StdoutBytes)

	res = tool.Call(context.Background(), nil)
	assert.Equal(t, map[string]any{}, res.Result, "no parameters are an empty object")
}

func TestAFileThatIsNoToolIsNamedInTheError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nothing.wasm")
	require.NoError(t, os.WriteFile(path, []byte("not wasm"), 0o600))
	_, err := LoadFile(context.Background(), newSandbox(t), path, sandbox.Policy{}, os.LookupEnv)
	assert.ErrorContains(t, err, path+": ")
}

func TestAResultIsShapedFromTheSandboxOutcome(t *testing.T) {
	usage := sandbox.Usage{Fuel: 7, Wall: 3 * time.Millisecond, MemoryPages: 2, StdoutBytes: 5}
	wantUsage := &protocol.Usage{Fuel: 7, WallMicros: 3000, MemoryPages: 2, StdoutBytes: 5}
	for name, tc := range map[string]struct {
		out  sandbox.Result
		want protocol.Result
	}{
		"json":     {sandbox.Result{Stdout: []byte(`[1, "a"]`), Usage: usage}, protocol.Result{Status: protocol.ResultSuccess, Result: []any{int64(1), "a"}, Usage: wantUsage}},
		"text":     {sandbox.Result{Stdout: []byte("plain words"), Usage: usage}, protocol.Result{Status: protocol.ResultSuccess, Result: "plain words", Usage: wantUsage}},
		"too deep": {sandbox.Result{Stdout: []byte(deepJSON(protocol.MaxDepth + 1)), Usage: usage}, protocol.Result{Status: protocol.ResultSuccess, Result: deepJSON(protocol.MaxDepth + 1), Usage: wantUsage}},
		"failure":  {sandbox.Result{Stdout: []byte(`{}`), Err: errors.New("out of fuel"), Usage: usage}, protocol.Result{Status: protocol.ResultFailure, Error: "out of fuel", Usage: wantUsage}},
	} {
		t.Run(name, func(t *testing.T) { assert.Equal(t, tc.want, Result(tc.out)) })
	}
}

// deepJSON is n nested arrays.
func deepJSON(n int) string {
	s := ""
	for range n {
		s = "[" + s + "]"
	}
	return s
}
