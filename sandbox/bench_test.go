package sandbox

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
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

// BenchmarkToolCall is one warm call of a Go, a C and a wat tool, as an
// agent makes it: the tool loaded with its manifest and a granted dir,
// its code compiled and, for a reactor, its snapshot taken, so that what
// is timed is the call alone. Besides wall time it reports the process's
// CPU time per call (cpu-µs/call: user and system, the Go collector's
// included), and the call's fuel.
func BenchmarkToolCall(b *testing.B) {
	data, cache := b.TempDir(), *benchCache
	if cache == "" {
		cache = b.TempDir()
	}
	if err := os.WriteFile(filepath.Join(data, "f.txt"), []byte("kiosk config"), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, path, params string }{
		{"go-hash_file_go", testenv.GoTool(b), `{"path":"/data/f.txt"}`},
		{"c-dir_usage", filepath.Join(testenv.Root(), "wasmtools", "examples", "c", "dir_usage", "dir_usage.wasm"), `{"path":"/data"}`},
		{"wat-echo", filepath.Join(testenv.TestdataTools(), "echo.wasm"), `{"path":"/data/f.txt"}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			mod, err := manifest.Load(tc.path)
			if err != nil {
				b.Fatal(err)
			}
			spec := Policy{Dirs: []Mount{{HostPath: data, GuestPath: "/data", ReadOnly: true}}}.Spec(mod, os.LookupEnv)
			sb := newSandbox(b, NewConfig().WithCacheDir(cache))
			tool := loadSpec(b, sb, spec)
			ctx := context.Background()
			first := sb.Call(ctx, tool, []byte(tc.params)) // compiles
			if first.Err != nil {
				b.Fatal(first.Err)
			}
			cpu := processCPU()
			for b.Loop() {
				if res := sb.Call(ctx, tool, []byte(tc.params)); res.Err != nil {
					b.Fatal(res.Err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/call")
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/call")
			b.ReportMetric(float64(first.Usage.Fuel), "fuel/call")
		})
	}
}

// benchCache is BenchmarkToolCall's compile cache, to keep across runs:
// under qemu, compiling a Go tool takes minutes. By default each run has
// its own, which no other process shares (or prunes).
var benchCache = flag.String("benchcache", "", "compile cache `dir` for BenchmarkToolCall, kept across runs (default: a fresh one per run)")

// processCPU is the user and system time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
