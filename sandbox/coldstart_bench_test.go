package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
)

// BenchmarkColdStart is the first call after an agent starts: a new
// Sandbox, the tool loaded (compiled, or read from the disk cache), and
// one call. It compares a warm disk cache with none, for a Go tool
// (hash_file_go, 3.7 MB) and a C tool (dir_usage, 34 KB); "loaded" is the same
// call on a tool already loaded, for scale.
func BenchmarkColdStart(b *testing.B) {
	data := b.TempDir()
	if err := os.WriteFile(filepath.Join(data, "f.txt"), []byte("kiosk config"), 0o644); err != nil {
		b.Fatal(err)
	}
	tools := map[string]string{
		"go": testenv.GoTool(b),
		"c":  filepath.Join(testenv.Root(), "wasmtools", "examples", "c", "dir_usage", "dir_usage.wasm"),
	}
	params := map[string][]byte{"go": []byte(`{"path":"/data/f.txt"}`), "c": []byte(`{"path":"/data"}`)}
	ctx := context.Background()
	for _, lang := range []string{"go", "c"} {
		mod, err := manifest.Load(tools[lang])
		if err != nil {
			b.Fatal(err)
		}
		spec := Policy{Dirs: []Mount{{HostPath: data, GuestPath: "/data"}}}.Spec(mod, os.LookupEnv)
		cache := b.TempDir()
		firstCall(b, ctx, NewConfig().WithCacheDir(cache), spec, params[lang]) // warms the disk cache

		b.Run(lang+"/warm-disk-cache", func(b *testing.B) {
			for b.Loop() {
				firstCall(b, ctx, NewConfig().WithCacheDir(cache), spec, params[lang])
			}
		})
		b.Run(lang+"/no-cache", func(b *testing.B) {
			for b.Loop() {
				firstCall(b, ctx, NewConfig(), spec, params[lang])
			}
		})
		b.Run(lang+"/loaded", func(b *testing.B) {
			sb := newSandbox(b, NewConfig())
			tool := loadSpec(b, sb, spec)
			for b.Loop() {
				if res := sb.Call(ctx, tool, params[lang]); res.Err != nil {
					b.Fatal(res.Err)
				}
			}
		})
	}
}

// firstCall starts a sandbox, loads spec and calls it once.
func firstCall(b *testing.B, ctx context.Context, cfg Config, spec Spec, params []byte) {
	sb, err := New(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close(ctx)
	tool, err := sb.Load(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	if res := sb.Call(ctx, tool, params); res.Err != nil {
		b.Fatal(res.Err)
	}
}
