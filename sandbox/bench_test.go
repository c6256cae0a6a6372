package sandbox

import (
	"context"
	"testing"
)

// BenchmarkCallWarm is one call of a tiny tool (echo.wat) through the
// sandbox: a fresh instance of an already compiled module, params in and
// result out. The per-call cost a tool author cannot avoid.
func BenchmarkCallWarm(b *testing.B) {
	sb := newSandbox(b, NewConfig())
	tool := load(b, sb, "echo", Limits{})
	params := []byte(`{"path":"/data/kiosk/config.json"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := sb.Call(ctx, tool, params); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/call")
}

// BenchmarkUnseal checks the digest of a cached instrumented copy the
// size of a Go tool's (5 MB), as a first call from the cache does.
func BenchmarkUnseal(b *testing.B) {
	sealed := seal(make([]byte, 5<<20))
	b.SetBytes(int64(len(sealed)))
	for b.Loop() {
		if _, err := unseal(sealed); err != nil {
			b.Fatal(err)
		}
	}
}
