package sandbox

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// callSymlinks runs testdata/tools/symlinks.c with {"links": links} on
// the granted dir dir, mounted at /data.
func callSymlinks(t *testing.T, dir, links string) Result {
	t.Helper()
	sb := newSandbox(t, NewConfig())
	tool := loadSpec(t, sb, Spec{Name: "symlinks", Wasm: fixture(t, "symlinks"), Mounts: []Mount{{HostPath: dir, GuestPath: "/data"}}})
	return sb.Call(context.Background(), tool, []byte(`{"links": "`+links+`"}`))
}

// requireLinksStayInside requires every symbolic link under dir to
// resolve, as the host resolves it, to dir or below, or to nothing yet.
func requireLinksStayInside(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return err
		}
		target, _ := os.Readlink(p)
		real, err := filepath.EvalSymlinks(p)
		if os.IsNotExist(err) {
			real, err = filepath.Abs(filepath.Join(filepath.Dir(p), target))
		}
		require.NoError(t, err)
		assert.True(t, real == dir || strings.HasPrefix(real, dir+"/"), "%s -> %s leads to %s, outside %s", p, target, real, dir)
		return nil
	}))
}

// A tool granted a directory read-write could leave a link there that
// points out: harmless to the tool, which cannot follow it, but a trap for
// whatever on the host reads the directory next. Every way around a check
// of the link's text is refused, and leaves nothing behind.
func TestALinkThatWouldLeadOutOfTheGrantIsRefusedAndNothingIsLeft(t *testing.T) {
	dir, outside := granted(t)
	dir, _ = filepath.EvalSymlinks(dir)
	res := callSymlinks(t, dir, "out")
	require.ErrorIs(t, res.Err, ErrDenied)
	for _, denial := range []string{
		`symlink "/data/x" -> "../../etc": leads outside the granted dir /data`,
		`symlink "/data/abs" -> "/etc": an absolute target leads outside the granted dir /data`,
		`symlink "/data/mid" -> "sub/../../etc": ".." after a name`,
		`symlink "/data/sub/top/y" -> "../etc": leads outside the granted dir /data`,
		`rename "/data/sub/top" to "/data/top2": the link -> "..": leads outside the granted dir /data`,
		`link "/data/sub/top" to "/data/top3": the link -> "..": leads outside the granted dir /data`,
		`rename "/data/a/b" to "/data/c": the link "/data/a/b/l" -> "../../sub": leads outside the granted dir /data`,
	} {
		assert.Contains(t, res.Err.Error(), denial)
	}
	for _, gone := range []string{"x", "abs", "mid", "y", "top2", "top3", "c"} {
		assert.NoFileExists(t, filepath.Join(dir, gone))
		assert.NoDirExists(t, filepath.Join(dir, gone))
	}
	assert.DirExists(t, filepath.Join(dir, "a", "b"), "the refused rename left the directory where it was")
	requireLinksStayInside(t, dir)
	entries, err := os.ReadDir(filepath.Dir(dir))
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing beside the granted dir")
	assert.NoFileExists(t, outside)
}

// Links that stay inside the grant, ".." and all, still work, through
// renames and hard links that keep them inside.
func TestALinkThatStaysInsideTheGrantStillWorks(t *testing.T) {
	dir, _ := granted(t)
	dir, _ = filepath.EvalSymlinks(dir)
	res := callSymlinks(t, dir, "inside")
	require.NoError(t, res.Err)
	var report map[string]string
	require.NoError(t, json.Unmarshal(res.Stdout, &report), "%s", res.Stdout)
	require.Len(t, report, 10)
	for what, outcome := range report {
		assert.Equal(t, "ok", outcome, what)
	}
	for link, target := range map[string]string{"cur": "sub", "a/sib": "../sub", "a/b2/l": "../../sub", "a/b2/sib": "../sub", "dangling": "later/file"} {
		got, err := os.Readlink(filepath.Join(dir, link))
		require.NoError(t, err, link)
		assert.Equal(t, target, got, link)
	}
	b, err := os.ReadFile(filepath.Join(dir, "sub", "f.txt"))
	require.NoError(t, err)
	assert.Equal(t, "through cur", string(b))
	requireLinksStayInside(t, dir)
}

// The moves a tool can make with links in the tree, one at a time, on a
// rootFS itself: which are refused, and that a refusal changes nothing.
func TestMovingATreeOfLinksIsRefusedOnlyWhereALinkWouldLeadOut(t *testing.T) {
	for name, tc := range map[string]struct {
		links    map[string]string // made by the host, under a/b
		from, to string
		refused  string
	}{
		"links that climb within the tree": {links: map[string]string{"c/l": "../d"}, from: "a/b", to: "b"},
		"deeper":                           {links: map[string]string{"l": "../../x"}, from: "a/b", to: "a/y/z/b"},
		"shallower, still inside":          {links: map[string]string{"l": "../x"}, from: "a/b", to: "b"},
		"shallower, then out": {links: map[string]string{"l": "../../x"}, from: "a/b", to: "b",
			refused: `rename "/data/a/b" to "/data/b": the link "/data/a/b/l" -> "../../x": leads outside the granted dir /data`},
		"a host's absolute link goes nowhere new": {links: map[string]string{"l": "/etc"}, from: "a/b", to: "a/c",
			refused: `the link "/data/a/b/l" -> "/etc": an absolute target leads outside`},
		"a lone link, deeper": {links: map[string]string{"l": "../../x"}, from: "a/b/l", to: "a/b/l2"},
	} {
		t.Run(name, func(t *testing.T) {
			dir, _ := granted(t)
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "a", "b", "c"), 0o755))
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "a", "y", "z"), 0o755))
			for link, target := range tc.links {
				require.NoError(t, os.Symlink(target, filepath.Join(dir, "a", "b", link)))
			}
			fsys, denied := openRootFS(t, dir)
			errno := fsys.Rename(tc.from, tc.to)
			if tc.refused == "" {
				assert.Zero(t, errno)
				assert.NoError(t, denied.err())
				return
			}
			assert.Equal(t, experimentalsys.EPERM, errno)
			require.Error(t, denied.err())
			assert.Contains(t, denied.err().Error(), tc.refused)
			assert.DirExists(t, filepath.Join(dir, tc.from), "refused, it moved nothing")
		})
	}
}

func TestMakingALinkWhereANameExistsOrTheGrantIsReadOnlyIsNoDenial(t *testing.T) {
	dir, _ := granted(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), nil, 0o644))
	fsys, denied := openRootFS(t, dir)
	assert.Equal(t, experimentalsys.EEXIST, fsys.Symlink("..", "f"), "nothing would be made")
	assert.Zero(t, fsys.Symlink("not/yet/there", "dangling"), "a link may lead to what does not exist yet")
	assert.Equal(t, experimentalsys.EPERM, fsys.Symlink("not/../..", "through"), `".." after a name that does not exist yet`)
	fsys.readOnly = true
	assert.Equal(t, experimentalsys.EROFS, fsys.Symlink("..", "ro"))
	require.Error(t, denied.err())
	assert.Equal(t, `denied: symlink "/data/through" -> "not/../..": ".." after a name: a link may climb only at its start, so that where it leads cannot change when a name on its way becomes a link`,
		denied.err().Error())
}

// openRootFS serves dir as a rootFS mounted at /data.
func openRootFS(t *testing.T, dir string) (*rootFS, *denials) {
	t.Helper()
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	t.Cleanup(func() { root.Close() })
	denied := &denials{}
	return &rootFS{root: root, guest: "/data", denied: denied, links: &sync.Mutex{}}, denied
}
