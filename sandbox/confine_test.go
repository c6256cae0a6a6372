package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// granted makes dir/granted, the directory a tool is given, and returns it
// with the path of dir/escaped.txt, the file the hostile tools try to write.
func granted(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	g := filepath.Join(dir, "granted")
	require.NoError(t, os.Mkdir(g, 0o755))
	return g, filepath.Join(dir, "escaped.txt")
}

// callWithDir calls the fixture name, granted dir as /data, in the form
// the test runs (forms).
func callWithDir(t *testing.T, name, dir string, readOnly bool) Result {
	t.Helper()
	sb := newSandbox(t, NewConfig())
	tool := loadSpec(t, sb, Spec{Name: name, Wasm: formFixture(t, name), Mounts: []Mount{{HostPath: dir, GuestPath: "/data", ReadOnly: readOnly}}})
	return sb.Call(context.Background(), tool, []byte(`{}`))
}

// forms runs test on the command fixtures, then on their reactor forms
// (testdata/tools/reactor), started from a snapshot: the hostile tools
// are stopped the same way in both.
func forms(t *testing.T, test func(t *testing.T)) {
	t.Run("command", test)
	t.Run("snapshot", test)
}

// formFixture reads the fixture name in the form of the subtest forms
// runs.
func formFixture(t *testing.T, name string) []byte {
	t.Helper()
	if strings.HasSuffix(t.Name(), "/snapshot") || strings.Contains(t.Name(), "/snapshot/") {
		return fixture(t, "reactor/"+name)
	}
	return fixture(t, name)
}

func TestDotDotCannotLeaveTheGrantedDir(t *testing.T) {
	forms(t, func(t *testing.T) {
		dir, outside := granted(t)
		res := callWithDir(t, "escape_dotdot", dir, false)
		require.ErrorIs(t, res.Err, ErrDenied)
		assert.EqualError(t, res.Err, `tool "escape_dotdot": denied: path_open "../escaped.txt": leads outside the granted dir (an absolute path or "..") (then: exited with status 1)`)
		assert.NoFileExists(t, outside)
	})
}

func TestASymlinkTheToolMakesCannotLeaveTheGrantedDir(t *testing.T) {
	forms(t, func(t *testing.T) {
		dir, outside := granted(t)
		res := callWithDir(t, "escape_symlink", dir, false)
		require.ErrorIs(t, res.Err, ErrDenied)
		assert.Contains(t, res.Err.Error(), `denied: symlink "/data/up" -> "..": leads outside the granted dir /data`)
		_, err := os.Lstat(filepath.Join(dir, "up"))
		assert.ErrorIs(t, err, os.ErrNotExist, "the link was never made")
		assert.NoFileExists(t, outside)
	})
}

func TestASymlinkAlreadyInTheGrantedDirCannotLeadOut(t *testing.T) {
	forms(t, func(t *testing.T) {
		for name, target := range map[string]func(outsideDir string) string{
			"absolute": func(o string) string { return o },
			"relative": func(string) string { return ".." },
		} {
			t.Run(name, func(t *testing.T) {
				dir, outside := granted(t)
				require.NoError(t, os.Symlink(target(filepath.Dir(outside)), filepath.Join(dir, "up")))
				res := callWithDir(t, "escape_symlink", dir, false)
				require.ErrorIs(t, res.Err, ErrDenied)
				assert.Contains(t, res.Err.Error(), "through a symbolic link")
				assert.NoFileExists(t, outside)
			})
		}
	})
}

func TestASymlinkThatStaysInsideStillWorks(t *testing.T) {
	forms(t, func(t *testing.T) {
		dir, outside := granted(t)
		require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
		require.NoError(t, os.Symlink("sub", filepath.Join(dir, "up")))
		res := callWithDir(t, "escape_symlink", dir, false)
		require.NoError(t, res.Err)
		got, err := os.ReadFile(filepath.Join(dir, "sub", "escaped.txt"))
		require.NoError(t, err)
		assert.Equal(t, "escaped", string(got))
		assert.NoFileExists(t, outside)
	})
}

func TestAReadOnlyDirCannotBeWritten(t *testing.T) {
	forms(t, func(t *testing.T) {
		dir, outside := granted(t)
		res := callWithDir(t, "escape_symlink", dir, true)
		require.ErrorIs(t, res.Err, ErrExit)
		assert.NotErrorIs(t, res.Err, ErrDenied, "refused as read-only before any path is followed")
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, entries)
		assert.NoFileExists(t, outside)
	})
}

func TestAToolWithoutMountsSeesNoFiles(t *testing.T) {
	_, outside := granted(t)
	sb := newSandbox(t, NewConfig())
	res := sb.Call(context.Background(), load(t, sb, "escape_dotdot", Limits{}), []byte(`{}`))
	require.ErrorIs(t, res.Err, ErrExit, "fd 3 does not exist")
	assert.NoFileExists(t, outside)
}

func TestEnvHoldsExactlyWhatWasGranted(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	res := sb.Call(context.Background(), loadSpec(t, sb, Spec{Name: "env", Wasm: fixture(t, "env"), Env: map[string]string{"TZ": "UTC", "LANG": "C"}}), nil)
	require.NoError(t, res.Err)
	assert.Equal(t, "LANG=C\x00TZ=UTC\x00", string(res.Stdout))

	res = sb.Call(context.Background(), load(t, sb, "env", Limits{}), nil)
	require.NoError(t, res.Err)
	assert.Empty(t, res.Stdout, "no host environment leaks in")
}

// A tool that asks for part of a granted dir gets it resolved inside the
// grant at each call. Were it a host path, a link planted there, by this
// tool in an earlier call or by another, would lead the next call out.
func TestANarrowedGrantCannotBeRedirectedByALink(t *testing.T) {
	grant, outside := granted(t)
	sub := filepath.Join(grant, "x")
	require.NoError(t, os.Mkdir(sub, 0o755))
	sb := newSandbox(t, NewConfig())
	tool, err := sb.Load(context.Background(), Spec{Name: "echo", Wasm: fixture(t, "echo"),
		Mounts: []Mount{{HostPath: grant, Sub: "x", GuestPath: "/data/x"}}})
	require.NoError(t, err)
	require.NoError(t, sb.Call(context.Background(), tool, nil).Err)

	require.NoError(t, os.Remove(sub))
	require.NoError(t, os.Symlink(filepath.Dir(outside), sub))
	res := sb.Call(context.Background(), tool, nil)
	require.Error(t, res.Err, "the call must not see what the link points to")
	assert.Contains(t, res.Err.Error(), `granted dir /data/x`)
	require.NoError(t, os.Remove(sub))
	require.NoError(t, os.Symlink("../../../../../../../../etc", sub))
	assert.Error(t, sb.Call(context.Background(), tool, nil).Err, "nor a relative link that climbs out")
}
