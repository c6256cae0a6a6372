package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/wasmtools/abi"
	"github.com/edgeaip/edgeaip/wasmtools/signature"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ctl runs aipctl with args and returns its stdout, stderr and exit code.
func ctl(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out bytes.Buffer
	errOut, code := ctlContext(t.Context(), &out, args...)
	return out.String(), errOut, code
}

// ctlContext runs aipctl under ctx, as main does under its signal
// context, writing its stdout to out; it returns its stderr and exit code.
func ctlContext(ctx context.Context, out io.Writer, args ...string) (string, int) {
	root := newRoot()
	var errOut bytes.Buffer
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(&errOut)
	err := execute(ctx, root)
	var ee *exitError
	switch {
	case err == nil:
		return errOut.String(), exitOK
	case errors.As(err, &ee):
		if ee.err != nil {
			errOut.WriteString(ee.err.Error())
		}
		return errOut.String(), ee.code
	}
	return err.Error(), exitUsage
}

func fixturePath(name string) string { return filepath.Join(testenv.TestdataTools(), name) }

func TestToolAuthorLoop(t *testing.T) {
	dir := t.TempDir()
	key, mod := filepath.Join(dir, "k"), filepath.Join(dir, "t.wasm")

	out, _, code := ctl(t, "tool", "keygen", "--out", key)
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "key id ")
	fi, err := os.Stat(key + ".key")
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the signing key is private")
	_, errOut, code := ctl(t, "tool", "keygen", "--out", key)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "exists; pass --force")

	out, errOut, code = ctl(t, "tool", "pack", fixturePath("echo.wasm"), "--manifest", filepath.Join(testenv.SignedTools(), "manifests", "signed_echo.json"), "--out", mod)
	require.Equal(t, exitOK, code, errOut)
	assert.True(t, strings.HasPrefix(out, "packed signed_echo 1.0.0 into "+mod+" ("), out)
	out, errOut, code = ctl(t, "tool", "pack", fixturePath("echo.wasm"), "--manifest", fixturePath("echo.json"), "--out", filepath.Join(dir, "e.wasm"))
	require.Equal(t, exitOK, code, errOut)
	assert.True(t, strings.HasPrefix(out, "packed echo into "), "no version, no double space: %q", out)
	_, errOut, code = ctl(t, "tool", "sign", "--key", key+".key", mod)
	require.Equal(t, exitOK, code, errOut)
	out, errOut, code = ctl(t, "tool", "verify", "--pub", key+".pub", mod)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "signature ok")
	verdict := func() verifyOutput {
		t.Helper()
		out, _, _ := ctl(t, "tool", "verify", "-o", "json", "--pub", key+".pub", mod)
		var v verifyOutput
		require.NoError(t, json.Unmarshal([]byte(out), &v), "%q", out)
		return v
	}
	ok := verdict()
	assert.True(t, ok.Verified)
	assert.Len(t, ok.KeyID, 16)
	assert.Empty(t, ok.Error)

	out, _, code = ctl(t, "tool", "inspect", "-o", "json", mod)
	require.Equal(t, exitOK, code)
	var in inspection
	require.NoError(t, json.Unmarshal([]byte(out), &in))
	assert.Equal(t, "embedded", in.ManifestSource)
	assert.Equal(t, "signed_echo", in.Manifest.Name)
	require.NotNil(t, in.Signature)
	assert.Len(t, in.Signature.KeyID, 16)
	assert.Len(t, in.SHA256, 64)
	assert.Len(t, in.Imports, 2)

	assert.Equal(t, abi.Command, in.Form)
	assert.Equal(t, sandbox.StartCommand, in.Start)

	out, _, code = ctl(t, "tool", "inspect", mod)
	require.Equal(t, exitOK, code)
	for _, want := range []string{"signed_echo", "1.0.0", "key id " + in.Signature.KeyID, "wasi_snapshot_preview1.fd_read (func)", "command (ABI v1)"} {
		assert.Contains(t, out, want)
	}

	b, err := os.ReadFile(mod)
	require.NoError(t, err)
	b[20] ^= 1
	require.NoError(t, os.WriteFile(mod, b, 0o644))
	_, errOut, code = ctl(t, "tool", "verify", "--pub", key+".pub", mod)
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, errOut, "signature does not match the module")
	bad := verdict()
	assert.Equal(t, verifyOutput{Path: mod, KeyID: bad.KeyID, Error: bad.Error}, bad, "a verdict, not silence")
	assert.Contains(t, bad.Error, "signature does not match the module")

	_, errOut, code = ctl(t, "tool", "verify", "--pub", filepath.Join(testenv.Root(), "testdata", "keys", "test.pub"), mod)
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, errOut, "signed by a key this host does not trust")
}

// inspect and run say which form a module takes and how its calls start:
// a reactor from a snapshot, whose initialization run reports.
func TestInspectAndRunShowTheForm(t *testing.T) {
	reactor := filepath.Join(t.TempDir(), "echo.wasm")
	_, errOut, code := ctl(t, "tool", "pack", fixturePath("reactor/echo.wasm"), "--manifest", fixturePath("echo.json"), "--out", reactor)
	require.Equal(t, exitOK, code, errOut)
	out, _, code := ctl(t, "tool", "inspect", "-o", "json", reactor)
	require.Equal(t, exitOK, code)
	var in inspection
	require.NoError(t, json.Unmarshal([]byte(out), &in))
	assert.Equal(t, abi.Reactor, in.Form)
	assert.Equal(t, sandbox.StartSnapshot, in.Start)
	out, _, _ = ctl(t, "tool", "inspect", reactor)
	assert.Contains(t, out, "reactor, started from a snapshot")

	out, errOut, code = ctl(t, "tool", "run", "--cache=", reactor, "a=1")
	require.Equal(t, exitOK, code, errOut)
	assert.JSONEq(t, `{"a":1}`, mustField(t, out, "result"))
	assert.Regexp(t, `start: from a snapshot \(reactor; initialized once: fuel \d+, .+, 1 pages\)`, errOut)
	_, errOut, _ = ctl(t, "tool", "run", "--cache=", fixturePath("echo.wasm"))
	assert.Contains(t, errOut, "start: command (ABI v1)")
}

// mustField is the JSON of a field of the JSON object doc.
func mustField(t *testing.T, doc, field string) string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(doc), &m), "%q", doc)
	return string(m[field])
}

// Item 12 of issue 43: -o is the output format for every command; the
// commands that write a file name it with --out. keygen, pack and sign
// still take their old -o FILE for a release, saying so.
func TestDashOIsTheOutputFormatAndOutNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.wasm"), filepath.Join(dir, "out.wasm")
	orig, err := os.ReadFile(fixturePath("echo.wasm"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(in, orig, 0o644))

	report, errOut, code := ctl(t, "tool", "pack", in, "--manifest", fixturePath("echo.json"), "-o", "json", "--out", out)
	require.Equal(t, exitOK, code, errOut)
	var m moduleOutput
	require.NoError(t, json.Unmarshal([]byte(report), &m), "%q", report)
	assert.Equal(t, out, m.Path)
	assert.NoFileExists(t, "json")
	got, err := os.ReadFile(in)
	require.NoError(t, err)
	assert.Equal(t, orig, got, "the input is left alone")

	report, errOut, code = ctl(t, "-o", "json", "tool", "keygen", "--out", filepath.Join(dir, "k"))
	require.Equal(t, exitOK, code, errOut)
	var k keygenOutput
	require.NoError(t, json.Unmarshal([]byte(report), &k), "%q", report)
	assert.Equal(t, filepath.Join(dir, "k.key"), k.PrivateKey)

	// The old spelling, for a release.
	old := filepath.Join(dir, "old")
	report, errOut, code = ctl(t, "tool", "keygen", "-o", old)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, report, old+".key: the signing key")
	assert.FileExists(t, old+".pub")
	assert.Equal(t, "aipctl: warning: aipctl tool keygen -o FILE is deprecated, and stops working in the next release: write --out "+old+
		" (-o is the output format, as for every command)\n", errOut)
	_, errOut, code = ctl(t, "tool", "sign", "--key", old+".key", out, "--output", filepath.Join(dir, "signed.wasm"))
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, errOut, "aipctl tool sign -o FILE is deprecated")
	assert.FileExists(t, filepath.Join(dir, "signed.wasm"))
	_, errOut, code = ctl(t, "tool", "keygen", "-o", "k2", "--out", filepath.Join(dir, "k3"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `-o "k2" with --out: -o is the output format, table or json, and --out names the file`)

	report, errOut, code = ctl(t, "tool", "sign", "--key", old+".key", out, "--format", "json")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, errOut, "aipctl: warning: aipctl tool sign --format is deprecated, and stops working in the next release: write -o json")
	require.NoError(t, json.Unmarshal([]byte(report), &m), "%q", report)
	_, errOut, code = ctl(t, "tool", "sign", "--key", old+".key", out, "--format", "yaml")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `--format: want table or json, got "yaml"`)
	_, errOut, code = ctl(t, "tool", "verify", "--pub", old+".pub", out, "-o", "yaml")
	assert.Equal(t, exitUsage, code, "no other command takes -o for a file")
	assert.Contains(t, errOut, `--output: want table or json, got "yaml"`)
}

func TestKeygenForceMakesThePrivateKeyPrivate(t *testing.T) {
	key := filepath.Join(t.TempDir(), "k")
	require.NoError(t, os.WriteFile(key+".key", []byte("old"), 0o644))
	_, errOut, code := ctl(t, "tool", "keygen", "--out", key)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, key+".key exists; pass --force")

	_, errOut, code = ctl(t, "tool", "keygen", "--out", key, "--force")
	require.Equal(t, exitOK, code, errOut)
	fi, err := os.Stat(key + ".key")
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "a key written over a 0644 file")

	other := filepath.Join(t.TempDir(), "other")
	require.NoError(t, os.WriteFile(other+".pub", []byte("old"), 0o644))
	_, errOut, code = ctl(t, "tool", "keygen", "--out", other)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, other+".pub exists")
	assert.NoFileExists(t, other+".key", "a refused keygen writes neither file")
}

// Pack and sign replace the module whole: a reader that opened it before
// (an agent loading it, a copy in progress) reads the old module to its
// end, not a mix.
func TestSignInPlaceReplacesTheModuleWhole(t *testing.T) {
	dir := t.TempDir()
	mod := filepath.Join(dir, "t.wasm")
	_, errOut, code := ctl(t, "tool", "pack", fixturePath("echo.wasm"), "--manifest", fixturePath("echo.json"), "--out", mod)
	require.Equal(t, exitOK, code, errOut)
	require.NoError(t, os.Chmod(mod, 0o640))
	before, err := os.ReadFile(mod)
	require.NoError(t, err)
	reader, err := os.Open(mod)
	require.NoError(t, err)
	defer reader.Close()

	_, errOut, code = ctl(t, "tool", "sign", "--key", filepath.Join(testenv.Root(), "testdata", "keys", "test.key"), mod)
	require.Equal(t, exitOK, code, errOut)
	seen, err := io.ReadAll(reader)
	require.NoError(t, err)
	assert.Equal(t, before, seen, "the reader of the old module")
	fi, err := os.Stat(mod)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm(), "a module signed in place keeps its mode")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left behind")
}

// The whole loop through aipctl, as the README tells it: a key, a packed
// and signed module, deployed to a device that trusts the key, then run
// there.
func TestADeployedSignedToolRunsOnTheDevice(t *testing.T) {
	dir := t.TempDir()
	key, mod, m := filepath.Join(dir, "acme"), filepath.Join(dir, "hello.wasm"), filepath.Join(dir, "hello.json")
	require.NoError(t, os.WriteFile(m, []byte(`{"name":"hello","version":"1.0.0","tool_type":"action","input_schema":{"type":"object"}}`), 0o644))
	for _, args := range [][]string{
		{"tool", "keygen", "--out", key},
		{"tool", "pack", fixturePath("echo.wasm"), "--manifest", m, "--out", mod},
		{"tool", "sign", "--key", key + ".key", mod},
	} {
		_, errOut, code := ctl(t, args...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
	}
	pub, err := signature.LoadPublicKey(key + ".pub")
	require.NoError(t, err)
	f := newFleet(t, nil)
	f.startAgent("kiosk-1", lobby, func(c *agent.Config) { c.TrustedKeys = []ed25519.PublicKey{pub} })

	_, errOut, code := f.ctl("exec", "kiosk-1", "hello")
	require.Equal(t, exitUsage, code, "not there before the deploy: %s", errOut)
	assert.Equal(t, "device kiosk-1 has no tool hello", errOut)
	out, errOut, code := f.ctl("tool", "deploy", "kiosk-1", mod)
	require.Equal(t, exitOK, code, "%s%s", out, errOut)
	assert.Contains(t, out, `"status": "success"`)
	out, errOut, code = f.ctl("exec", "kiosk-1", "hello", "greeting=hi", "n=2")
	require.Equal(t, exitOK, code, "%s%s", out, errOut)
	var results []protocol.Result
	require.NoError(t, json.Unmarshal([]byte(out), &results), "%q", out)
	require.Len(t, results, 1)
	assert.Equal(t, map[string]any{"greeting": "hi", "n": float64(2)}, results[0].Result)
}

func TestPackAndSignRefuseWhatAnAgentWouldRefuse(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"name":"x","tool_type":"query","input_schema":{"type":"object"}}`), 0o644))
	_, errOut, code := ctl(t, "tool", "pack", fixturePath("echo.wasm"), "--manifest", bad, "--out", filepath.Join(dir, "x.wasm"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `tool_type: want action or data_collection, got "query"`)

	lib := filepath.Join(dir, "lib.wasm")
	require.NoError(t, os.WriteFile(lib, []byte("\x00asm\x01\x00\x00\x00\x05\x03\x01\x00\x01"), 0o644))
	_, errOut, code = ctl(t, "tool", "pack", lib, "--manifest", fixturePath("echo.json"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "not a tool module: it exports neither _start (a WASI command) nor aip_call (a reactor)")

	snapshot := filepath.Join(dir, "snapshot.json")
	require.NoError(t, os.WriteFile(snapshot, []byte(`{"name":"echo","tool_type":"action","input_schema":{"type":"object"},"init":"snapshot"}`), 0o644))
	_, errOut, code = ctl(t, "tool", "pack", fixturePath("echo.wasm"), "--manifest", snapshot, "--out", filepath.Join(dir, "x.wasm"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `init "snapshot": a WASI command (it exports _start) cannot be snapshotted`)

	_, errOut, code = ctl(t, "tool", "sign", "--key", filepath.Join(testenv.Root(), "testdata", "keys", "test.key"), fixturePath("echo.wasm"), "--out", filepath.Join(dir, "s.wasm"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "run aipctl tool pack first")
}

// runResult runs aipctl tool run and decodes the Result it prints.
func runResult(t *testing.T, args ...string) (map[string]any, int) {
	t.Helper()
	out, errOut, code := ctl(t, append([]string{"tool", "run", "--cache="}, args...)...)
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res), "stdout %q stderr %q", out, errOut)
	return res, code
}

func TestRunIsTheAgentsSandbox(t *testing.T) {
	res, code := runResult(t, fixturePath("echo.wasm"), "a=1", "--params", `{"b":"x"}`)
	require.Equal(t, exitOK, code, res)
	assert.Equal(t, map[string]any{"a": float64(1), "b": "x"}, res["result"])
	assert.Contains(t, res, "usage")

	for _, huge := range []string{"5GiB", "18446744073709551615"} {
		_, errOut, code := ctl(t, "tool", "run", "--cache=", fixturePath("echo.wasm"), "--memory", huge)
		assert.Equal(t, exitUsage, code, "--memory %s", huge)
		assert.Contains(t, errOut, "is more than 4GiB", "--memory %s", huge)
	}

	// --memory past the agent's default ceiling (64MiB) is the ceiling.
	res, code = runResult(t, fixturePath("membomb.wasm"), "--memory", "96MiB")
	assert.Equal(t, exitFailed, code)
	// membomb grows by 1MiB (16 pages) from one page, so it stops one
	// short of 96MiB.
	assert.EqualValues(t, 1+95*16, res["usage"].(map[string]any)["memory_pages"], "grew to the 96MiB of --memory")
	res, code = runResult(t, fixturePath("echo.wasm"), "--memory", "1GiB")
	assert.Equal(t, exitOK, code, "more than the 256MiB an agent's calls may reserve together: %v", res)

	res, code = runResult(t, fixturePath("spin.wasm"), "--fuel", "100000")
	assert.Equal(t, exitFailed, code)
	assert.Regexp(t, `^tool "spin": out of fuel after \d+ units \(budget 100000\)$`, res["error"])
	assert.Greater(t, res["usage"].(map[string]any)["fuel"], float64(100000), "the fuel spent is in the usage")

	res, code = runResult(t, fixturePath("spin.wasm"), "--timeout", "100ms")
	assert.Equal(t, exitFailed, code)
	assert.Equal(t, `tool "spin": timed out after 100ms`, res["error"])

	granted := t.TempDir()
	res, code = runResult(t, fixturePath("escape_symlink.wasm"), "--allow-dir", granted+":/data")
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, res["error"], `denied: symlink "/data/up" -> "..": leads outside the granted dir /data`)
	assert.NoFileExists(t, filepath.Join(filepath.Dir(granted), "escaped.txt"))

	dir := t.TempDir()
	m := filepath.Join(dir, "strict.json")
	require.NoError(t, os.WriteFile(m, []byte(`{"name":"strict","tool_type":"action","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}}`), 0o644))
	strict := filepath.Join(dir, "strict.wasm")
	_, errOut, code := ctl(t, "tool", "pack", fixturePath("echo.wasm"), "--manifest", m, "--out", strict)
	require.Equal(t, exitOK, code, errOut)
	res, code = runResult(t, strict, "extra=1")
	assert.Equal(t, exitFailed, code)
	assert.Equal(t, `tool "strict": invalid parameters: parameter "extra": not allowed (additionalProperties is false); parameter "path": missing (required)`, res["error"])
}

func dirUsageTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a"), []byte("abc"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "b"), []byte("defg"), 0o644))
	return dir
}

func TestTheCExampleToolRuns(t *testing.T) {
	mod := filepath.Join(testenv.Root(), "wasmtools", "examples", "c", "dir_usage", "dir_usage.wasm")
	res, code := runResult(t, mod, "path=/data", "--allow-dir", dirUsageTree(t)+":/data")
	require.Equal(t, exitOK, code, res)
	assert.Equal(t, map[string]any{"path": "/data", "files": float64(2), "dirs": float64(1), "bytes": float64(7)}, res["result"])

	res, code = runResult(t, mod, "path=/etc", "--allow-dir", dirUsageTree(t)+":/data")
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, res["error"], "open /etc:")
}

func TestTheCExampleToolBuildsWithItsBuildScript(t *testing.T) {
	for _, tool := range []string{"clang", "wasm-ld"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed; make deps installs it (apt-get install -y clang lld wasi-libc libclang-rt-14-dev-wasm32)", tool)
		}
	}
	out := filepath.Join(t.TempDir(), "dir_usage.wasm")
	cmd := exec.Command("sh", filepath.Join(testenv.Root(), "wasmtools", "examples", "c", "dir_usage", "build.sh"), out)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	res, code := runResult(t, out, "path=/data", "--allow-dir", dirUsageTree(t)+":/data")
	require.Equal(t, exitOK, code, res)
	assert.Equal(t, float64(7), res["result"].(map[string]any)["bytes"])
}

// Item 10 of issue 24: Go's linker imports fd_write twice; inspect lists
// it once, with the count.
func TestInspectListsAnImportOnceWithItsCount(t *testing.T) {
	mod := testenv.GoTool(t)
	out, errOut, code := sh(t, nil, "aipctl tool inspect "+mod)
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, 1, strings.Count(out, "wasi_snapshot_preview1.fd_write "), out)
	assert.Contains(t, out, "  wasi_snapshot_preview1.fd_write (func, imported 2 times)\n")
	assert.Contains(t, out, "  wasi_snapshot_preview1.fd_read (func)\n")

	out, _, code = sh(t, nil, "aipctl tool inspect -o json "+mod)
	require.Equal(t, exitOK, code)
	var in inspection
	require.NoError(t, json.Unmarshal([]byte(out), &in))
	counts := map[string]int{}
	for _, imp := range in.Imports {
		counts[imp.Name] += imp.Count
		assert.NotEmpty(t, imp.Name)
	}
	assert.Equal(t, 2, counts["fd_write"])
	assert.Equal(t, 1, counts["fd_read"])
	assert.Len(t, in.Imports, len(counts), "each import once")
}

// Item 3 of issue 24: pack reports every problem of a manifest at once,
// each at its line, as a compiler would.
func TestPackReportsEveryManifestProblemWithItsLine(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "tool.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{
  "name": "hash file",
  "tool_type": "action",
  "input_schema": {"type": "object"},
  "limits": {"timeout": "10 seconds", "memroy": "32MiB"}
}
`), 0o644))
	out, errOut, code := sh(t, nil, "cd "+dir+" && aipctl tool pack "+fixturePath("echo.wasm")+" --manifest tool.json --out t.wasm")
	assert.Equal(t, exitUsage, code, out)
	assert.Equal(t, `aipctl: tool.json: the manifest is not valid:
  tool.json:2: name: "hash file": want 1-64 of [A-Za-z0-9_-], not starting with '-'
  tool.json:5: limits.memroy: unknown field; did you mean memory?
  tool.json:5: limits.timeout: duration "10 seconds": want a non-negative duration such as "5s"
`, errOut)
	assert.NoFileExists(t, filepath.Join(dir, "t.wasm"))

	require.NoError(t, os.WriteFile(bad, []byte("{\n  \"name\": \"t\",\n  \"tool_type\": \"action\"\n  \"input_schema\": {}\n}\n"), 0o644))
	_, errOut, code = sh(t, nil, "cd "+dir+" && aipctl tool pack "+fixturePath("echo.wasm")+" --manifest tool.json --out t.wasm")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "aipctl: tool.json: the manifest is not valid:\n  tool.json:4:3: invalid character '\"' after object key:value pair\n", errOut)
}
