package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/edgeaip/edgeaip/wasmtools/meter"
	"github.com/edgeaip/edgeaip/wasmtools/section"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// ErrNotSnapshottable is wrapped by the refusal of a tool whose module
// cannot be started from a snapshot: the meter cannot put it in the
// snapshot form, or its initialization did something a snapshot would
// freeze wrongly (read stdin, wrote stdout, touched files).
var ErrNotSnapshottable = errors.New("cannot be started from a snapshot")

// plainReasonSection is the custom section of an instrumented copy that
// says why a reactor could not be put in the snapshot form, so that a
// load from the cache can say it too.
const plainReasonSection = "aip.snapshot.refused"

// snapshot is a reactor's state after its initialization: what each of
// its calls starts from.
type snapshot struct {
	image   *image
	pages   uint32   // memory size, in pages
	names   []string // the exported mutable globals
	globals []uint64 // and their values
	time    fakeTime // where reproducible clocks stood
	usage   Usage    // what initialization used
}

// restore puts the snapshot into mod, a fresh instance of the snapshot
// form whose memory is mem: the image is there already (callMemory maps
// it); the memory grows to the image's size, and the globals are set.
func (sn *snapshot) restore(mod api.Module, mem *callMemory) error {
	if mem.err != nil {
		return fmt.Errorf("snapshot: %w", mem.err)
	}
	m := mod.Memory()
	if have := m.Size() / pageSize; have < sn.pages {
		if _, ok := m.Grow(sn.pages - have); !ok {
			return fmt.Errorf("snapshot: memory could not grow from %d to %d pages", have, sn.pages)
		}
	}
	for i, name := range sn.names {
		g, ok := mod.ExportedGlobal(name).(api.MutableGlobal)
		if !ok {
			return fmt.Errorf("snapshot: global %s is not exported mutable", name)
		}
		g.Set(sn.globals[i])
	}
	return nil
}

// takeSnapshot captures mod's memory, into an image in dir (newImage),
// and its globals.
func takeSnapshot(mod api.Module, dir string) (*snapshot, error) {
	m := mod.Memory()
	if m == nil {
		return nil, errors.New("snapshot: the module has no memory")
	}
	b, _ := m.Read(0, m.Size())
	im, err := newImage(dir, b)
	if err != nil {
		return nil, err
	}
	sn := &snapshot{image: im, pages: m.Size() / pageSize}
	for i := 0; ; i++ {
		name := meter.SnapshotGlobalPrefix + strconv.Itoa(i)
		g := mod.ExportedGlobal(name)
		if g == nil {
			return sn, nil
		}
		sn.names = append(sn.names, name)
		sn.globals = append(sn.globals, g.Get())
	}
}

// free releases the snapshot's image; calls running from it go on.
func (sn *snapshot) free() {
	if sn != nil {
		sn.image.free()
	}
}

// takeInitSnapshot initializes t once, compiling it in lane l, in an
// instance of its own, under its limits (counted afresh: its own fuel
// budget, deadline and memory limit), and returns the snapshot its calls start from. It is refused,
// wrapping ErrNotSnapshottable, if initialization reads stdin, writes
// stdout or touches a file: a snapshot would freeze what it got, or lose
// what it did. The wait for compiling and admission does not count
// against the deadline, as for a call.
func (s *Sandbox) takeInitSnapshot(ctx context.Context, t *Tool, l lane) (*snapshot, error) {
	if !t.enter() {
		return nil, ErrUnloaded
	}
	defer t.leave(context.WithoutCancel(ctx))
	done, err := s.compiles.prepareWork(ctx, t.size)
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	code, err := t.compiled(ctx, l)
	done()
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	if _, ok := code.ExportedFunctions()[meter.SnapshotInitExport]; !ok {
		return nil, s.plainReason(ctx, t)
	}
	release, err := s.adm.enter(ctx, t.limits.MemoryPages)
	if err != nil {
		return nil, err
	}
	defer release()
	ctx = withDeadlineOf(ctx, t.limits.Timeout)
	ctx, cancel := context.WithTimeout(ctx, t.limits.Timeout)
	defer cancel()

	watch := &initWatch{}
	var sn *snapshot
	ex := s.execute(ctx, t, watch, fakeTime{}, func(ctx context.Context, cfg wazero.ModuleConfig, _ *callMemory) error {
		ctx = withInitWatch(ctx, watch)
		mod, err := s.rt.InstantiateModule(ctx, code, cfg.WithStartFunctions())
		if err != nil {
			return err
		}
		defer mod.Close(context.WithoutCancel(ctx))
		if err := initialize(ctx, mod); err != nil || watch.err() != nil {
			return err
		}
		sn, err = takeSnapshot(mod, s.imageDir)
		return err
	})
	if ex.stdout.buf.Len() > 0 {
		watch.add("wrote to stdout, which no call would return")
	}
	// What initialization did that a snapshot cannot keep comes first: it
	// is the likelier cause of any failure that followed.
	if err := cmp.Or(watch.err(), ex.err); err != nil {
		sn.free()
		return nil, err
	}
	sn.time, sn.usage = ex.time, ex.usage
	return sn, nil
}

// plainReason says why t's instrumented copy is not in the snapshot form:
// the meter refused it, and the copy says why.
func (s *Sandbox) plainReason(ctx context.Context, t *Tool) error {
	why := "the meter could not put it in the snapshot form"
	if b, err := s.meteredBytes(ctx, t); err == nil {
		if reason, found, _ := section.Custom(b, plainReasonSection); found {
			why = string(reason)
		}
	}
	return fmt.Errorf("%w: %s", ErrNotSnapshottable, why)
}

// initWatch records what a reactor's initialization does that a snapshot
// could not keep: it is the initialization's stdin, and it hears of the
// file operations the WASI listener sees.
type initWatch struct{ notes }

type initWatchKey struct{}

func withInitWatch(ctx context.Context, w *initWatch) context.Context {
	return context.WithValue(ctx, initWatchKey{}, w)
}

// Read implements io.Reader: initialization has no stdin to read.
func (w *initWatch) Read([]byte) (int, error) {
	w.add("read stdin, which holds a call's parameters, not yet there")
	return 0, io.EOF
}

// err is nil if initialization did nothing a snapshot could not keep.
func (w *initWatch) err() error {
	return w.wrap(ErrNotSnapshottable)
}
