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

// notes keeps what a run did that the host must report, the first eight
// things: enough to say what happened, bounded whatever the guest does.
type notes struct {
	mu   sync.Mutex
	list []string
}

func (n *notes) add(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.list) < 8 {
		n.list = append(n.list, fmt.Sprintf(format, args...))
	}
}

// wrap is nil if nothing was noted, else err followed by the notes.
func (n *notes) wrap(err error) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.list) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", err, strings.Join(n.list, "; "))
}

// denials records a call's attempts to leave its granted directories. The
// guest sees only an errno (EPERM); the host keeps what was tried, so that
// the call's Result says it.
type denials struct{ notes }

type denialsKey struct{}

func withDenials(ctx context.Context, d *denials) context.Context {
	return context.WithValue(ctx, denialsKey{}, d)
}

// err is nil if nothing was denied.
func (d *denials) err() error { return d.wrap(ErrDenied) }

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

// fileParams adds to pathParams the one other way to learn what files
// there are: listing a preopened directory, by its descriptor.
var fileParams = map[string][][2]int{"fd_readdir": nil}

// escapeListenerFactory watches the path arguments of WASI calls. wazero
// refuses a path that is absolute or climbs out with ".." before any
// filesystem sees it, so this is where such an attempt can be named. It
// also tells a reactor's initialization (initWatch) that it touched
// files, which a snapshot of it could not keep.
type escapeListenerFactory struct{}

func (escapeListenerFactory) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	params, ok := pathParams[def.Name()]
	if _, file := fileParams[def.Name()]; !ok && !file {
		return nil
	}
	return experimental.FunctionListenerFunc(func(ctx context.Context, mod api.Module, def api.FunctionDefinition, args []uint64, _ experimental.StackIterator) {
		d, _ := ctx.Value(denialsKey{}).(*denials)
		w, _ := ctx.Value(initWatchKey{}).(*initWatch)
		if w != nil && len(params) == 0 {
			w.add("called %s", def.Name())
		}
		for _, pl := range params {
			b, ok := mod.Memory().Read(uint32(args[pl[0]]), uint32(args[pl[1]]))
			p := string(b)
			if w != nil {
				w.add("called %s %q", def.Name(), p)
			}
			if d != nil && ok && escapes(p) {
				d.add("%s %q: leads outside the granted dir (an absolute path or \"..\")", def.Name(), p)
			}
		}
	})
}

// escapes applies wazero's own rule for a path relative to a directory
// descriptor: after cleaning, it must be a valid fs.FS path.
func escapes(p string) bool { return !fs.ValidPath(path.Clean(p)) }
