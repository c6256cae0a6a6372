// Package testenv gives tests what they need from the machine: the stock
// tools compiled to WebAssembly, and the repository's testdata.
package testenv

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/edgeaip/edgeaip/wasmtools/signature"
)

// StockTools are the stock tools: written in C, each committed built
// beside its source as wasmtools/tools/NAME/NAME.wasm (make fixtures
// rebuilds them).
var StockTools = []string{"read_file", "write_file", "list_dir", "hash_file"}

// GoExampleTool is the example tool written in Go with the SDK
// (wasmtools/examples/go), which the tests of a Go module run.
const GoExampleTool = "hash_file_go"

var (
	stockOnce sync.Once
	stockDir  string
	stockErr  error
)

// Root is the repository root.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestdataTools is testdata/tools: tiny and hostile tool fixtures.
func TestdataTools() string { return filepath.Join(Root(), "testdata", "tools") }

// SignedTools is testdata/tools/signed: echo packed as signed_echo (signed
// with the test key), unsigned_echo, foreign_echo (signed with a key no
// test trusts) and tampered_echo (altered after signing).
func SignedTools() string { return filepath.Join(TestdataTools(), "signed") }

// TestKey is the public key, testdata/keys/test.pub, that signed the
// trusted fixtures.
func TestKey(t testing.TB) ed25519.PublicKey {
	t.Helper()
	pub, err := signature.LoadPublicKey(filepath.Join(Root(), "testdata", "keys", "test.pub"))
	if err != nil {
		t.Fatalf("test key: %v", err)
	}
	return pub
}

// Packed is wasm with manifest m embedded, signed with the test key.
func Packed(t testing.TB, wasm []byte, m manifest.Manifest) []byte {
	t.Helper()
	out, err := manifest.Embed(wasm, m)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := signature.LoadPrivateKey(filepath.Join(Root(), "testdata", "keys", "test.key"))
	if err != nil {
		t.Fatalf("test key: %v", err)
	}
	if out, err = signature.Sign(out, priv); err != nil {
		t.Fatal(err)
	}
	return out
}

// ReadSigned returns the bytes of the fixture signed/NAME.wasm.
func ReadSigned(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(SignedTools(), name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// StockToolsDir returns a directory holding the committed stock tools,
// and only them, as NAME.wasm: a copy made once per test binary, which
// tests may load whole but must not change.
func StockToolsDir(t testing.TB) string {
	t.Helper()
	stockOnce.Do(func() { stockDir, stockErr = copyStockTools() })
	if stockErr != nil {
		t.Fatalf("stock tools: %v", stockErr)
	}
	return stockDir
}

// StockTool returns the path of the committed stock tool name.
func StockTool(name string) string {
	return filepath.Join(Root(), "wasmtools", "tools", name, name+".wasm")
}

// copyStockTools copies the stock tools into a dir of the temp dir named
// for their content, shared by test binaries, and returns it.
func copyStockTools() (string, error) {
	h := sha256.New()
	mods := map[string][]byte{}
	for _, name := range StockTools {
		b, err := os.ReadFile(StockTool(name))
		if err != nil {
			return "", err
		}
		fmt.Fprintln(h, name, len(b))
		h.Write(b)
		mods[name] = b
	}
	return sharedDir("edgeaip-stock-tools-", hex.EncodeToString(h.Sum(nil)), func(dir string) error {
		for name, b := range mods {
			if err := os.WriteFile(filepath.Join(dir, name+".wasm"), b, 0o644); err != nil {
				return err
			}
		}
		return nil
	})
}

// GoTool builds the example tool in Go, GoExampleTool, as make build
// does (the Makefile's TOOL_BUILDMODE and TOOL_LDFLAGS), with its
// manifest embedded, and returns the path of its module. Builds are kept
// in the temp dir under a hash of their sources and the Makefile, so that
// test binaries share them.
func GoTool(t testing.TB) string {
	t.Helper()
	src := filepath.Join(Root(), "wasmtools", "examples", "go", GoExampleTool)
	dir, err := buildGoTools("edgeaip-go-tool-", map[string]string{GoExampleTool: src}, true)
	if err != nil {
		t.Fatalf("build %s: %v", GoExampleTool, err)
	}
	return filepath.Join(dir, GoExampleTool+".wasm")
}

// GoFixture builds the Go tool testdata/tools/NAME as the example tool in
// Go is built, without a manifest, and returns the path of its module.
func GoFixture(t testing.TB, name string) string {
	t.Helper()
	dir, err := buildGoTools("edgeaip-go-fixture-", map[string]string{name: filepath.Join(TestdataTools(), name)}, false)
	if err != nil {
		t.Fatalf("build %s: %v", name, err)
	}
	return filepath.Join(dir, name+".wasm")
}

// buildGoTools builds each package of srcs (name → dir) as the tool
// NAME.wasm, with its manifest NAME.json from its dir embedded if
// manifests is set, into a temp dir named prefix and a hash of what the
// builds depend on, and returns that dir.
func buildGoTools(prefix string, srcs map[string]string, manifests bool) (string, error) {
	dirs := slices.Collect(maps.Values(srcs))
	sum, err := sourcesHash(append(dirs, filepath.Join(Root(), "wasmtools"))...)
	if err != nil {
		return "", err
	}
	flags, err := toolBuildFlags()
	if err != nil {
		return "", err
	}
	return sharedDir(prefix, sum, func(dir string) error {
		for name, src := range srcs {
			out := filepath.Join(dir, name+".wasm")
			cmd := exec.Command(Go(), "build", "-trimpath", "-buildmode="+flags.mode, "-ldflags="+flags.ldflags, "-o", out, ".")
			cmd.Dir = src
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
			if b, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %w\n%s", name, err, b)
			}
			if !manifests {
				continue
			}
			if err := pack(out, filepath.Join(src, name+".json")); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		return nil
	})
}

// sharedDir returns the dir of the temp dir named prefix and the first 16
// characters of sum, having fill it first if it is not there yet: fill
// writes into a fresh dir, renamed into place once complete, so that test
// binaries running at once share it and never see it half made.
func sharedDir(prefix, sum string, fill func(dir string) error) (string, error) {
	final := filepath.Join(os.TempDir(), prefix+sum[:16])
	if _, err := os.Stat(final); err == nil {
		return final, nil
	}
	dir, err := os.MkdirTemp("", prefix+"build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := fill(dir); err != nil {
		return "", err
	}
	if err := os.Rename(dir, final); err != nil && !os.IsExist(err) {
		if _, statErr := os.Stat(final); statErr != nil {
			return "", err
		}
	}
	return final, nil
}

// Go is the go command of the toolchain running the tests.
func Go() string {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		return "go"
	}
	return gobin
}

// pack embeds the manifest at manifestPath into the module at wasmPath.
func pack(wasmPath, manifestPath string) error {
	b, err := os.ReadFile(manifestPath)
	if err != nil {
		return err
	}
	m, err := manifest.Parse(b)
	if err != nil {
		return err
	}
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		return err
	}
	packed, err := manifest.Embed(wasm, m)
	if err != nil {
		return err
	}
	return os.WriteFile(wasmPath, packed, 0o644)
}

// sourcesHash digests everything a tool build depends on: the toolchain,
// the module's requirements, the Makefile's flags, and the files of dirs.
func sourcesHash(dirs ...string) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version())
	for _, f := range []string{"go.mod", "go.sum", "Makefile"} {
		b, err := os.ReadFile(filepath.Join(Root(), f))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	slices.Sort(dirs)
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			fmt.Fprintln(h, p, len(b))
			h.Write(b)
			return err
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// buildFlags are how tools in Go are built.
type buildFlags struct{ mode, ldflags string }

// toolBuildFlags reads the Makefile's TOOL_BUILDMODE and TOOL_LDFLAGS,
// the one place they are set.
func toolBuildFlags() (buildFlags, error) {
	path := filepath.Join(Root(), "Makefile")
	b, err := os.ReadFile(path)
	if err != nil {
		return buildFlags{}, fmt.Errorf("tool build flags: %w", err)
	}
	var f buildFlags
	for name, v := range map[string]*string{"TOOL_BUILDMODE": &f.mode, "TOOL_LDFLAGS": &f.ldflags} {
		m := regexp.MustCompile(`(?m)^` + name + `\s*:=\s*(.*)$`).FindSubmatch(b)
		if m == nil {
			return buildFlags{}, fmt.Errorf("tool build flags: no %s := ... in %s", name, path)
		}
		*v = strings.TrimSpace(string(m[1]))
	}
	return f, nil
}

// NPMDir is where `make deps-npm` installs the npm packages tests use:
// $EDGEAIP_NPM_CACHE, or .cache/npm under the repository.
func NPMDir() string {
	if d := os.Getenv("EDGEAIP_NPM_CACHE"); d != "" {
		return d
	}
	return filepath.Join(Root(), ".cache", "npm")
}

// NodePackage returns the directory of an npm package that `make deps-npm`
// installed, at the version the Makefile pins. It skips the test when node
// or the package is missing, and fails it when another version is there:
// the tests are of the pinned versions, and a stale cache would pass or
// fail them for another's reasons.
func NodePackage(t testing.TB, name string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed; make deps installs it (apt-get install -y nodejs npm)")
	}
	pins, err := npmPins()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := pinnedPackage(NPMDir(), name, pins)
	if errors.Is(err, errNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// errNotInstalled is a pinned npm package absent from the cache.
var errNotInstalled = errors.New("not installed")

// pinnedPackage returns the directory of the npm package name in cache,
// checking that its version is the one pins has for it.
func pinnedPackage(cache, name string, pins map[string]string) (string, error) {
	want, ok := pins[name]
	if !ok {
		return "", fmt.Errorf("npm package %s is not pinned in the Makefile's NPM_PACKAGES", name)
	}
	dir := filepath.Join(cache, "node_modules", name)
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("npm package %s@%s is %w in %s; run `make deps-npm`", name, want, errNotInstalled, cache)
	}
	if err != nil {
		return "", fmt.Errorf("npm package %s: %w", name, err)
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return "", fmt.Errorf("npm package %s: %s: %w", name, filepath.Join(dir, "package.json"), err)
	}
	if pkg.Version != want {
		return "", fmt.Errorf("npm package %s in %s is version %q, not the pinned %q (the Makefile's NPM_PACKAGES); run `make deps-npm`",
			name, cache, pkg.Version, want)
	}
	return dir, nil
}

// npmPins are the npm packages the tests run, by name, with the versions
// the Makefile's NPM_PACKAGES pins, which `make deps-npm` installs: the
// one list of them.
func npmPins() (map[string]string, error) {
	path := filepath.Join(Root(), "Makefile")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("npm pins: %w", err)
	}
	m := npmPackagesVar.FindSubmatch(b)
	if m == nil {
		return nil, fmt.Errorf("npm pins: no NPM_PACKAGES := ... in %s", path)
	}
	pins := map[string]string{}
	for _, spec := range strings.Fields(strings.ReplaceAll(string(m[1]), "\\\n", " ")) {
		// A scoped name starts with @: the version follows the last one.
		at := strings.LastIndex(spec, "@")
		if at <= 0 || at == len(spec)-1 {
			return nil, fmt.Errorf("npm pins: %q in %s's NPM_PACKAGES: want NAME@VERSION", spec, path)
		}
		pins[spec[:at]] = spec[at+1:]
	}
	return pins, nil
}

// npmPackagesVar is the value of NPM_PACKAGES in the Makefile, with its
// continued lines.
var npmPackagesVar = regexp.MustCompile(`(?m)^NPM_PACKAGES\s*:=((?:.*\\\n)*.*)$`)

// Chromium returns the path of Debian's chromium, and skips the test when
// it is missing.
func Chromium(t testing.TB) string {
	t.Helper()
	const path = "/usr/bin/chromium"
	if _, err := os.Stat(path); err != nil {
		t.Skip("chromium is not installed; make deps installs it (apt-get install -y chromium)")
	}
	return path
}

// CheckWithPydantic has UFO's models (ufo_wire.py validate) read every
// frame of side ("server" or "client"), and fails t on a frame they refuse.
func CheckWithPydantic(t testing.TB, side string, frames []string) {
	t.Helper()
	var in strings.Builder
	for _, f := range frames {
		in.WriteString(side + " " + f + "\n")
	}
	cmd := UFOWire(t, "validate")
	cmd.Stdin = strings.NewReader(in.String())
	if res, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pydantic refused a %s frame: %v\n%s", side, err, res)
	}
}

// UFOWire returns a command that runs testdata/protocol/ufo_wire.py (UFO's
// pydantic models) with args, and skips the test when python3 cannot import
// pydantic.
func UFOWire(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import pydantic; print(pydantic.VERSION)").Output()
	if err != nil {
		t.Skipf("python3 with pydantic not found (%v); make deps installs it (apt-get install -y python3-pydantic)", err)
	}
	t.Logf("UFO's models under pydantic %s", bytes.TrimSpace(out))
	return exec.Command("python3", append([]string{filepath.Join(Root(), "testdata", "protocol", "ufo_wire.py")}, args...)...)
}
