package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Item 9 of issue 24: aipctl tool init writes a tool that builds with its
// Makefile, packs and runs, in Go and in C, on a machine with nothing
// else: the Go build fetches no module (GOPROXY=off, an empty module
// cache), since the SDK it needs is a copy beside it. Item 11 of issue
// 43: and in Rust, with Debian's rustc or rustup's. Each then runs on a
// real agent.
func TestToolInitWritesAToolThatBuildsPacksAndRuns(t *testing.T) {
	for _, c := range []struct {
		lang, name string
		needs      []string
	}{
		{"go", "greet", nil},
		{"c", "greet_c", []string{"clang", "wasm-ld"}},
		{"rust", "greet_rs", nil},
	} {
		t.Run(c.lang, func(t *testing.T) {
			for _, tool := range append(c.needs, "make") {
				if _, err := exec.LookPath(tool); err != nil {
					t.Skipf("%s is not installed; make deps installs it", tool)
				}
			}
			if c.lang == "rust" && !rustForWASI() {
				t.Skip("no rustc with a WASI target (rustup's wasm32-wasip1, or Debian's rustc and libstd-rust-dev-wasm32, which make deps installs)")
			}
			dir := t.TempDir()
			fresh := "export PATH=" + filepath.Dir(testenv.Go()) + ":$PATH GOPROXY=off GOFLAGS= GOWORK=off GOMODCACHE=" + t.TempDir() + "; "
			out, errOut, code := sh(t, nil, "cd "+dir+" && aipctl tool init "+c.name+" --lang "+c.lang)
			require.Equal(t, exitOK, code, errOut)
			assert.Equal(t, "build and call it: cd "+c.name+" && make && aipctl tool run "+c.name+".wasm name=world\n", lastLine(out))

			out, errOut, code = sh(t, nil, fresh+"cd "+filepath.Join(dir, c.name)+" && make")
			require.Equal(t, exitOK, code, "%s%s", out, errOut)
			assert.Contains(t, out, "aipctl tool pack "+c.name+".wasm --manifest "+c.name+".json\npacked "+c.name+" 0.1.0 into "+c.name+".wasm")

			mod := filepath.Join(dir, c.name, c.name+".wasm")
			out, errOut, code = sh(t, nil, "aipctl tool run "+mod+` 'name=edge & "co" é'`)
			require.Equal(t, exitOK, code, "%s%s", out, errOut)
			assert.Contains(t, errOut, "start: from a snapshot (reactor; initialized once")
			var res map[string]any
			require.NoError(t, json.Unmarshal([]byte(out), &res), out)
			assert.Equal(t, map[string]any{"greeting": `hello, edge & "co" é`}, res["result"])

			// Escapes as an agent's JSON has them (Go's encoder writes < as
			// \u003c); and the schema the manifest carries.
			out, errOut, code = sh(t, nil, "aipctl tool run "+mod+` --params '{"name":"\u003c\ud83d\ude00\\"}'`)
			require.Equal(t, exitOK, code, "%s%s", out, errOut)
			require.NoError(t, json.Unmarshal([]byte(out), &res), out)
			assert.Equal(t, map[string]any{"greeting": "hello, <😀\\"}, res["result"])
			out, _, code = sh(t, nil, "aipctl tool run "+mod+" name=")
			assert.Equal(t, exitFailed, code)
			assert.Contains(t, out, `invalid parameters: parameter \"name\": minLength: got 0, want 1`, "the manifest's schema holds")

			out, _, code = sh(t, nil, "aipctl tool inspect "+mod)
			require.Equal(t, exitOK, code)
			assert.Contains(t, out, "reactor, started from a snapshot")

			onDevice := t.TempDir()
			b, err := os.ReadFile(mod)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(onDevice, c.name+".wasm"), b, 0o644))
			f := newFleet(t, nil)
			f.startAgent("kiosk-1", lobby, func(cfg *agent.Config) {
				cfg.ToolDirs = []string{"new=" + onDevice}
				cfg.Limits.Timeout = time.Minute // a Go tool's first call compiles it
			})
			out, errOut, code = sh(t, f, "aipctl exec kiosk-1 "+c.name+" name=kiosk")
			require.Equal(t, exitOK, code, "%s%s", out, errOut)
			assert.Contains(t, out, `"greeting": "hello, kiosk"`)
		})
	}
}

// rustForWASI reports whether the Makefile aipctl tool init writes for
// Rust finds a rustc with a WASI target: rustup's (on the PATH) with
// wasm32-wasip1, or Debian's (/usr/bin) with wasm32-wasi.
func rustForWASI() bool {
	for _, rustc := range []string{"rustc", "/usr/bin/rustc"} {
		sysroot, err := exec.Command(rustc, "--print", "sysroot").Output()
		if err != nil {
			continue
		}
		for _, target := range []string{"wasm32-wasip1", "wasm32-wasi"} {
			if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(sysroot)), "lib", "rustlib", target)); err == nil && fi.IsDir() {
				return true
			}
		}
	}
	return false
}

func TestToolInitRefusesWhatItCannotWrite(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "keep"), []byte("x"), 0o644))
	for args, want := range map[string]string{
		"tool init 'a b'":                    `aipctl: tool name "a b": want 1-64 of [A-Za-z0-9_-], not starting with '-'` + "\n",
		"tool init t --lang zig":             `aipctl: language "zig": want go, c or rust` + "\n",
		"tool init t --dir " + dir:           "aipctl: " + dir + ": exists and is not empty\n",
		"tool init t --dir " + dir + "/keep": "aipctl: " + dir + "/keep: exists and is not a directory\n",
	} {
		out, errOut, code := sh(t, nil, "cd "+t.TempDir()+" && aipctl "+args)
		assert.Equal(t, exitUsage, code, args)
		assert.Empty(t, out, args)
		assert.Equal(t, want, errOut, args)
	}
}

// lastLine is the last line of s, with its newline.
func lastLine(s string) string {
	lines := strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1] + "\n"
}
