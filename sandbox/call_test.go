package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/wasmtools/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var pathSchema = map[string]any{
	"type":                 "object",
	"properties":           map[string]any{"path": map[string]any{"type": "string"}},
	"required":             []any{"path"},
	"additionalProperties": false,
}

func TestParametersAreValidatedBeforeTheToolRuns(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	// spin would time out if it ran at all.
	tool := loadSpec(t, sb, Spec{Name: "spin", Wasm: fixture(t, "spin"), InputSchema: pathSchema, Limits: Limits{Timeout: 5 * time.Second}})
	for params, want := range map[string]string{
		`{}`:                   `tool "spin": invalid parameters: parameter "path": missing (required)`,
		`{"path":7}`:           `tool "spin": invalid parameters: parameter "path": got number, want string`,
		`{"path":"/a","x":""}`: `tool "spin": invalid parameters: parameter "x": not allowed (additionalProperties is false)`,
	} {
		res := sb.Call(context.Background(), tool, []byte(params))
		require.ErrorIs(t, res.Err, ErrInvalidParams, params)
		var se *schema.Error
		require.ErrorAs(t, res.Err, &se)
		assert.EqualError(t, res.Err, want)
		assert.Zero(t, res.Usage, "the tool never ran")
	}
}

func TestABadSchemaIsRefusedAtLoad(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	_, err := sb.Load(context.Background(), Spec{Name: "echo", Wasm: fixture(t, "echo"), InputSchema: map[string]any{"type": 3}})
	assert.ErrorContains(t, err, `tool "echo": input_schema: schema:`)
}

func TestAClosedToolFinishesItsCallsThenRefusesNewOnes(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	tool := load(t, sb, "spin", Limits{Timeout: 300 * time.Millisecond})
	done := make(chan Result, 1)
	go func() { done <- sb.Call(context.Background(), tool, nil) }()
	require.Eventually(t, func() bool { return sb.adm.running.Load() == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, tool.Close(context.Background()))
	assert.ErrorIs(t, (<-done).Err, ErrTimeout, "the running call ends on its own terms")
	assert.ErrorIs(t, sb.Call(context.Background(), tool, nil).Err, ErrUnloaded)
}

func TestTheCompileCacheIsPrivateAndKeyedByCostModel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	ctx := context.Background()
	for range 2 {
		sb := newSandbox(t, NewConfig().WithCacheDir(dir))
		require.NoError(t, sb.Call(ctx, load(t, sb, "echo", Limits{}), nil).Err)
		require.NoError(t, sb.Close(ctx))
	}
	model := filepath.Join(dir, costModelDir)
	assert.Equal(t, "cost-model-fuel-4", costModelDir, "the directory names the meter's cost model")
	for _, d := range []string{dir, model} {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), d)
	}
	for _, sub := range []string{"compiled", "metered"} {
		n := 0
		filepath.WalkDir(filepath.Join(model, sub), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				fi, _ := d.Info()
				assert.Zero(t, fi.Mode().Perm()&0o077, "cache entry %s is private", p)
				if !strings.HasSuffix(p, ".compiled") { // the record of echo's compiled code
					n++
				}
			}
			return nil
		})
		assert.Equal(t, 1, n, "echo was %s once, and the second start reused it", sub)
	}
	sum := sha256.Sum256(fixture(t, "echo"))
	_, err := os.Stat(filepath.Join(model, "metered", hex.EncodeToString(sum[:])+".wasm"))
	assert.NoError(t, err, "instrumented modules are kept under the original module's digest")
}
