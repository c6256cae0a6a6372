package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// ErrDenied is wrapped by the error of a call that tried to reach outside
// the directories it was granted.
var ErrDenied = errors.New("denied")

// denials records a call's attempts to leave its granted directories. The
// guest sees only an errno (EPERM); the host keeps what was tried, so that
// the call's Result says it.
type denials struct {
	mu   sync.Mutex
	list []string
}

type denialsKey struct{}

func withDenials(ctx context.Context, d *denials) context.Context {
	return context.WithValue(ctx, denialsKey{}, d)
}

func (d *denials) add(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.list) < 8 {
		d.list = append(d.list, fmt.Sprintf(format, args...))
	}
}

// err is nil if nothing was denied.
func (d *denials) err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.list) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrDenied, strings.Join(d.list, "; "))
}

// pathParams lists, for each WASI function that resolves paths against a
// directory descriptor, the (pointer, length) parameter indices of those
// paths. path_symlink's first path is the link's target, which is only
// resolved when the link is followed, so it is not listed.
var pathParams = map[string][][2]int{
	"path_create_directory":   {{1, 2}},
	"path_filestat_get":       {{2, 3}},
	"path_filestat_set_times": {{2, 3}},
	"path_link":               {{2, 3}, {5, 6}},
	"path_open":               {{2, 3}},
	"path_readlink":           {{1, 2}},
	"path_remove_directory":   {{1, 2}},
	"path_rename":             {{1, 2}, {4, 5}},
	"path_symlink":            {{3, 4}},
	"path_unlink_file":        {{1, 2}},
}

// escapeListenerFactory watches the path arguments of WASI calls. wazero
// refuses a path that is absolute or climbs out with ".." before any
// filesystem sees it, so this is where such an attempt can be named.
type escapeListenerFactory struct{}

func (escapeListenerFactory) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	params, ok := pathParams[def.Name()]
	if !ok {
		return nil
	}
	return experimental.FunctionListenerFunc(func(ctx context.Context, mod api.Module, def api.FunctionDefinition, args []uint64, _ experimental.StackIterator) {
		d, ok := ctx.Value(denialsKey{}).(*denials)
		if !ok {
			return
		}
		for _, pl := range params {
			b, ok := mod.Memory().Read(uint32(args[pl[0]]), uint32(args[pl[1]]))
			if p := string(b); ok && escapes(p) {
				d.add("%s %q: leads outside the granted dir (an absolute path or \"..\")", def.Name(), p)
			}
		}
	})
}

// escapes applies wazero's own rule for a path relative to a directory
// descriptor: after cleaning, it must be a valid fs.FS path.
func escapes(p string) bool { return !fs.ValidPath(path.Clean(p)) }
