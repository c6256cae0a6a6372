package sandbox

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stockGrant is a granted dir for the stock tools' tests: /data (rw)
// with a text file, a binary one, a subdirectory, a link that stays
// inside and two that lead out, and /ro (read-only) with a file. It
// returns the host dirs of /data and /ro, and of the dir outside them.
func stockGrant(t *testing.T) (data, ro, outside string) {
	t.Helper()
	root := t.TempDir()
	data, ro, outside = filepath.Join(root, "data"), filepath.Join(root, "ro"), filepath.Join(root, "outside")
	for _, d := range []string{filepath.Join(data, "sub"), ro, outside} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	for name, content := range map[string]string{
		filepath.Join(data, "a.txt"):     "kiosk <config> & \u2028\n",
		filepath.Join(data, "bin"):       "\x00\x01\xff",
		filepath.Join(data, "sub", "b"):  "bb",
		filepath.Join(ro, "r.txt"):       "ro",
		filepath.Join(outside, "secret"): "secret",
	} {
		require.NoError(t, os.WriteFile(name, []byte(content), 0o644))
	}
	require.NoError(t, os.Symlink("a.txt", filepath.Join(data, "in")))
	require.NoError(t, os.Symlink(outside, filepath.Join(data, "out")))
	require.NoError(t, os.Symlink("..", filepath.Join(data, "up")))
	return data, ro, outside
}

// callStock calls the committed stock tool name as an agent loads it
// (its manifest's schema and limits), granted data as /data and ro as
// /ro, read-only.
func callStock(t *testing.T, name, data, ro, params string) Result {
	t.Helper()
	mod, err := manifest.Load(testenv.StockTool(name))
	require.NoError(t, err)
	spec := Policy{Dirs: []Mount{{HostPath: data, GuestPath: "/data"}, {HostPath: ro, GuestPath: "/ro", ReadOnly: true}}}.Spec(mod, os.LookupEnv)
	sb := newSandbox(t, NewConfig())
	return sb.Call(context.Background(), loadSpec(t, sb, spec), []byte(params))
}

// The stock tools answer byte for byte as the Go tools they replaced did
// (what a differential run of both showed, kept here).
func TestTheStockToolsAnswerAsTheGoToolsDid(t *testing.T) {
	data, ro, _ := stockGrant(t)
	for _, tc := range []struct{ tool, params, want string }{
		{"read_file", `{"path":"/data/a.txt"}`, `{"path":"/data/a.txt","size":21,"content":"kiosk \u003cconfig\u003e \u0026 \u2028\n","encoding":"utf-8","truncated":false}`},
		{"read_file", `{"path":"/data/a.txt","max_bytes":5}`, `{"path":"/data/a.txt","size":21,"content":"kiosk","encoding":"utf-8","truncated":true}`},
		{"read_file", `{"path":"/data/bin"}`, `{"path":"/data/bin","size":3,"content":"AAH/","encoding":"base64","truncated":false}`},
		{"read_file", `{"path":"/data/sub/../in"}`, `{"path":"/data/sub/../in","size":21,"content":"kiosk \u003cconfig\u003e \u0026 \u2028\n","encoding":"utf-8","truncated":false}`},
		{"hash_file", `{"path":"/data/sub/b"}`, `{"path":"/data/sub/b","sha256":"3b64db95cb55c763391c707108489ae18b4112d783300de38e033b4c98c3deaf","size":2}`},
		{"list_dir", `{"path":"/data"}`, `{"entries":[{"name":"a.txt","type":"file","size":21},{"name":"bin","type":"file","size":3},{"name":"in","type":"symlink","size":0},` +
			`{"name":"out","type":"symlink","size":0},{"name":"sub","type":"dir","size":0},{"name":"up","type":"symlink","size":0}],"path":"/data"}`},
		{"write_file", `{"path":"/data/w","content":"AAH/","encoding":"base64"}`, `{"bytes_written":3,"path":"/data/w"}`},
		{"write_file", `{"path":"/data/w","content":"<&>","append":true}`, `{"bytes_written":3,"path":"/data/w"}`},
	} {
		res := callStock(t, tc.tool, data, ro, tc.params)
		require.NoError(t, res.Err, "%s %s", tc.tool, tc.params)
		assert.Equal(t, tc.want+"\n", string(res.Stdout), "%s %s", tc.tool, tc.params)
	}
	got, err := os.ReadFile(filepath.Join(data, "w"))
	require.NoError(t, err)
	assert.Equal(t, "\x00\x01\xff<&>", string(got))
}

// A file larger than read_file's default of 256 KiB comes back cut
// there, and says so.
func TestReadFileReadsAtMost256KiBUnlessAskedForMore(t *testing.T) {
	data, ro, _ := stockGrant(t)
	require.NoError(t, os.WriteFile(filepath.Join(data, "big"), bytes.Repeat([]byte("x"), 300<<10), 0o644))
	res := callStock(t, "read_file", data, ro, `{"path":"/data/big"}`)
	require.NoError(t, res.Err)
	assert.Equal(t, `{"path":"/data/big","size":307200,"content":"`+strings.Repeat("x", 256<<10)+`","encoding":"utf-8","truncated":true}`+"\n", string(res.Stdout))
	res = callStock(t, "read_file", data, ro, `{"path":"/data/big","max_bytes":400000}`)
	require.NoError(t, res.Err)
	assert.Contains(t, string(res.Stdout), `"truncated":false`)
}

// Every way out of the granted dirs fails, with the words the Go tools
// used: a path under no granted dir, ".." (cleaned first, as Go's wasip1
// port does, so that it names a path under no granted dir), a link that
// leads out (refused by the host), and a write to a read-only grant.
func TestTheStockToolsStayInTheirGrantedDirs(t *testing.T) {
	for _, tc := range []struct{ tool, params, want string }{
		{"read_file", `{"path":"/etc/hostname"}`, `tool "read_file": exited with status 1: open /etc/hostname: not under a directory this tool was granted`},
		{"read_file", `{"path":"/data/../outside/secret"}`, `tool "read_file": exited with status 1: open /data/../outside/secret: not under a directory this tool was granted`},
		{"read_file", `{"path":"/data/out/secret"}`, `tool "read_file": denied: open "/data/out/secret": leads outside the granted dir /data through a symbolic link`},
		{"hash_file", `{"path":"/data/up/outside/secret"}`, `tool "hash_file": denied: open "/data/up/outside/secret": leads outside the granted dir /data through a symbolic link`},
		{"list_dir", `{"path":"/data/out"}`, `tool "list_dir": denied: open "/data/out": leads outside the granted dir /data through a symbolic link`},
		{"list_dir", `{"path":"/data/.."}`, `tool "list_dir": exited with status 1: open /data/..: not under a directory this tool was granted`},
		{"write_file", `{"path":"/data/out/new","content":"x"}`, `tool "write_file": denied: open "/data/out/new": leads outside the granted dir /data through a symbolic link`},
		{"write_file", `{"path":"/data/../outside/new","content":"x"}`, `tool "write_file": exited with status 1: open /data/../outside/new: not under a directory this tool was granted`},
		{"write_file", `{"path":"/ro/r.txt","content":"x"}`, `tool "write_file": exited with status 1: open /ro/r.txt: this tool was granted that directory read-only`},
		{"read_file", `{"path":"/data/missing"}`, `tool "read_file": exited with status 1: open /data/missing: No such file or directory`},
	} {
		data, ro, outside := stockGrant(t)
		res := callStock(t, tc.tool, data, ro, tc.params)
		require.Error(t, res.Err, "%s %s", tc.tool, tc.params)
		assert.Contains(t, res.Err.Error(), tc.want, "%s %s", tc.tool, tc.params)
		assert.Empty(t, res.Stdout)
		assert.NoFileExists(t, filepath.Join(outside, "new"))
		got, err := os.ReadFile(filepath.Join(ro, "r.txt"))
		require.NoError(t, err)
		assert.Equal(t, "ro", string(got))
	}
}

// The stock tools are small, and what is committed is what their sources
// build (clang and wasi-libc are deterministic, and so is aipctl tool
// pack).
func TestTheStockToolsAreSmallAndBuiltFromTheirSources(t *testing.T) {
	for _, name := range testenv.StockTools {
		fi, err := os.Stat(testenv.StockTool(name))
		require.NoError(t, err)
		assert.LessOrEqual(t, fi.Size(), int64(256<<10), name)
	}
	for _, tool := range []string{"clang", "wasm-ld"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed; make deps installs it (apt-get install -y clang lld wasi-libc libclang-rt-14-dev-wasm32)", tool)
		}
	}
	out := t.TempDir()
	cmd := exec.Command("sh", filepath.Join(testenv.Root(), "wasmtools", "tools", "build.sh"))
	cmd.Env = append(os.Environ(), "OUT="+out)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	for _, name := range testenv.StockTools {
		built, err := os.ReadFile(filepath.Join(out, name+".wasm"))
		require.NoError(t, err)
		committed, err := os.ReadFile(testenv.StockTool(name))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(built, committed), "%s.wasm is stale: run make fixtures", name)
	}
}
