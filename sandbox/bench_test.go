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
