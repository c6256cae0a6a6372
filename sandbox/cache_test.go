package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

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
