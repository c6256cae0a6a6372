package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/build"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// protocolDir is the package whose code cborgen generates.
const protocolDir = "../.."

// TestGeneratedFileIsCurrent runs the generator as the package's
// go:generate line runs it, into memory, and compares what it writes with
// the committed file: a struct changed without go generate fails here.
func TestGeneratedFileIsCurrent(t *testing.T) {
	c, err := parseArgs(directiveArgs(t, protocolDir), io.Discard)
	require.NoError(t, err)
	want, err := generate(protocolDir, c)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(protocolDir, c.out))
	require.NoError(t, err)
	if line, ok := firstDifferentLine(got, want); ok {
		t.Fatalf("protocol/%s is stale: run go generate ./protocol\n%s", c.out, line)
	}
}

// directiveArgs returns the arguments of the one go:generate line in dir
// that runs cborgen.
func directiveArgs(t *testing.T, dir string) []string {
	t.Helper()
	const prefix = "//go:generate go run ./internal/cborgen "
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var found [][]string
	for _, p := range paths {
		f, err := os.Open(p)
		require.NoError(t, err)
		s := bufio.NewScanner(f)
		for s.Scan() {
			if args, ok := strings.CutPrefix(s.Text(), prefix); ok {
				found = append(found, strings.Fields(args))
			}
		}
		require.NoError(t, s.Err())
		require.NoError(t, f.Close())
	}
	require.Len(t, found, 1, "one go:generate line in %s runs cborgen", dir)
	return found[0]
}

// firstDifferentLine describes the first line where got and want differ.
func firstDifferentLine(got, want []byte) (string, bool) {
	g, w := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := range max(len(g), len(w)) {
		var gl, wl []byte
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if !bytes.Equal(gl, wl) || i >= len(g) || i >= len(w) {
			return fmt.Sprintf("line %d:\n  committed: %s\n  generated: %s", i+1, gl, wl), true
		}
	}
	return "", false
}

// TestEveryKind generates the fast path for Kinds (testdata/kinds), a
// struct with a field of every type and omit rule cborgen accepts, most of
// which the messages do not use yet, in a scratch copy of protocol; and
// runs testdata/kinds/kinds_test.go there, which holds the generated code
// to cborEnc's bytes and to the strict decoder's values. Building the copy
// takes a few seconds.
func TestEveryKind(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a copy of protocol")
	}
	goTool, err := exec.LookPath("go")
	require.NoError(t, err)
	scratch := t.TempDir()
	pkg := filepath.Join(scratch, "protocol")
	require.NoError(t, os.Mkdir(pkg, 0o755))
	for _, name := range []string{"go.mod", "go.sum"} {
		copyFile(t, filepath.Join(protocolDir, "..", name), filepath.Join(scratch, name))
	}
	c, err := parseArgs(directiveArgs(t, protocolDir), io.Discard)
	require.NoError(t, err)
	bp, err := build.ImportDir(protocolDir, 0)
	require.NoError(t, err)
	for _, name := range bp.GoFiles {
		if name != c.out {
			copyFile(t, filepath.Join(protocolDir, name), filepath.Join(pkg, name))
		}
	}
	for _, name := range []string{"kinds.go", "kinds_test.go"} {
		copyFile(t, filepath.Join("testdata/kinds", name), filepath.Join(pkg, name))
	}
	copyModuleDeps(t, goTool, scratch)
	c.roots = append(c.roots, "Kinds")
	src, err := generate(pkg, c)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(pkg, c.out), src, 0o644))

	cmd := exec.CommandContext(t.Context(), goTool, "test", "-count=1", "-run", "^TestKinds$", "./protocol")
	cmd.Dir = scratch
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOPROXY=off", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go test in the scratch copy:\n%s", out)
}

// copyModuleDeps copies into scratch the packages of this module that
// protocol imports, so that the copy of protocol builds.
func copyModuleDeps(t *testing.T, goTool, scratch string) {
	root := filepath.Join(protocolDir, "..")
	cmd := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}} {{.Dir}}{{end}}", "./protocol")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go list -deps ./protocol")
	const module = "github.com/edgeaip/edgeaip/"
	for line := range strings.Lines(string(out)) {
		path, dir, _ := strings.Cut(strings.TrimSpace(line), " ")
		rel, ours := strings.CutPrefix(path, module)
		if !ours || rel == "protocol" {
			continue
		}
		bp, err := build.ImportDir(dir, 0)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(scratch, rel), 0o755))
		for _, name := range bp.GoFiles {
			copyFile(t, filepath.Join(dir, name), filepath.Join(scratch, rel, name))
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o644))
}

// TestRefusals holds the generator to refusing, with the field's name,
// what the fast path has no code for, rather than writing code that
// encodes it differently from cborEnc.
func TestRefusals(t *testing.T) {
	for root, want := range map[string]string{
		"Float":       "refused.Float.Ratio: type float64 is not supported",
		"NoTag":       "refused.NoTag.Name: no cbor tag",
		"SameKey":     `SameKey: fields A and B both have the key "a"`,
		"Nested":      "refused.Nested.Inner: type Fine: a struct field must be a pointer or a slice",
		"KeyAsInt":    `refused.KeyAsInt.A: cbor tag option "keyasint" is not supported`,
		"StringMap":   "refused.StringMap.Labels: type map[string]string is not supported",
		"DeepRefusal": "refused.DeepRefusal.Items: refused.Float.Ratio: type float64 is not supported",
		"Missing":     "package refused declares no type Missing",
	} {
		_, err := generate("testdata/refused", config{out: "gen.go", roots: []string{root}})
		require.ErrorContains(t, err, want, root)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"-o", "x.go"}, {"Message"}} {
		_, err := parseArgs(args, io.Discard)
		require.Error(t, err, "%q", args)
	}
}
