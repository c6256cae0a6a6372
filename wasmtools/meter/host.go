package meter

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Errors a metered call fails with. wazero wraps them, so test with
// errors.Is on what Call or InstantiateModule returns.
var (
	// ErrOutOfFuel: the call used more than its budget. The message says
	// how much: "out of fuel after N units".
	ErrOutOfFuel = errors.New("out of fuel")
	// ErrCallDepth: calls nested deeper than Options.MaxCallDepth.
	ErrCallDepth = errors.New("call depth exceeded")
	// ErrDeadline: the context's deadline passed while the guest ran. The
	// error also matches context.DeadlineExceeded.
	ErrDeadline = errors.New("deadline passed")

	errNoMeter     = errors.New("meter: guest called the safepoint without a Meter in the call's context (use WithMeter)")
	errSharedMeter = errors.New("meter: one Meter was used by two module instances")
)

// DefaultSliceSize is how much fuel the guest gets between safepoints. At
// about a nanosecond per unit under wazero's compiler, that is around ten
// milliseconds: the bound on how late a deadline is noticed and how long
// the guest can hold up Go's garbage collector. The interpreter is tens of
// times slower per unit; hosts that use it may want smaller slices.
const DefaultSliceSize = 10_000_000

// Install registers the host module the instrumented code imports. Call it
// once per wazero.Runtime, before instantiating instrumented modules.
func Install(ctx context.Context, r wazero.Runtime) error {
	_, err := r.NewHostModuleBuilder(HostModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(safepoint), []api.ValueType{api.ValueTypeI32}, nil).
		WithParameterNames("reason").
		Export(SafepointFunc).
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("meter: install host module %q: %w", HostModule, err)
	}
	return nil
}

// Meter is the fuel budget of one guest call: one module instance, from
// its instantiation (which runs a command's _start) to the end of the
// call. Create one per call with NewMeter, attach it to the call's
// context with WithMeter, and read Consumed when the call has returned.
//
// A Meter meters one instance, and is not safe for concurrent use. Use a
// new one for every call: calls into one instance may each have their
// own Meter, one after the other.
type Meter struct {
	budget int64
	slice  int64

	// The fuel part of the guest's counter (see counter.go) is
	// granted - consumed; granted is all the fuel handed out so far.
	granted int64
	mod     api.Module // the metered instance, once it has called in
	counter api.MutableGlobal
}

// MeterOption configures a Meter.
type MeterOption func(*Meter)

// WithSliceSize sets how much fuel the guest gets between safepoints
// (default DefaultSliceSize). Smaller slices notice deadlines sooner, at
// the price of more calls into the host; they do not change how much fuel
// a call consumes nor where it runs out.
func WithSliceSize(n uint64) MeterOption {
	return func(m *Meter) { m.slice = int64(min(max(n, 1), maxSlice)) }
}

// NewMeter returns a Meter that lets a call consume up to budget units of
// fuel.
func NewMeter(budget uint64, opts ...MeterOption) *Meter {
	m := &Meter{budget: clampInt64(budget), slice: DefaultSliceSize}
	for _, o := range opts {
		o(m)
	}
	return m
}

func clampInt64(n uint64) int64 { return int64(min(n, math.MaxInt64)) }

type meterKey struct{}

// WithMeter returns a context that meters the guest calls made with it.
func WithMeter(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// Consumed returns the fuel the call has consumed, the same on every engine
// and architecture. It is exact at every return to the host, including
// proc_exit and a failure with ErrOutOfFuel, ErrCallDepth or ErrDeadline;
// a call that succeeds has consumed no more than its budget. After a trap
// inside the guest (such as unreachable or an out-of-bounds access) it
// counts the straight-line segment that trapped in full, since segments
// are paid for before they run. With ErrOutOfFuel it exceeds the budget by
// the cost of the last segment, which is paid before the budget is
// checked; a call that traps may exceed it by the work since the last
// check.
func (m *Meter) Consumed() uint64 {
	if m.counter == nil {
		return 0
	}
	fuel, _ := m.read()
	return uint64(m.granted - fuel)
}

// read splits the counter into fuel left in the slice and call depth.
func (m *Meter) read() (fuel, depth int64) {
	c := int64(m.counter.Get())
	return c >> depthBits, c & depthMask
}

// safepoint is the host function the instrumented code calls: on entry
// from the host (reason 2), when a slice is used up (reason 0), and when
// the call depth is exceeded (reason 1). The guest stores its counter in
// the global before the call and reloads it after, so the global is exact
// here.
func safepoint(ctx context.Context, mod api.Module, stack []uint64) {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	if m == nil {
		panic(errNoMeter)
	}
	var err error
	switch uint32(stack[0]) {
	case reasonEnter:
		err = m.enter(mod)
	case reasonDepth:
		err = ErrCallDepth
	}
	if err == nil {
		err = m.refill(ctx)
	}
	if err != nil {
		panic(err)
	}
}

// enter binds m to the instance the host calls into. The first time, it
// zeroes the counter: whatever an earlier call left in it, fuel or depth,
// is not this call's.
func (m *Meter) enter(mod api.Module) error {
	if m.mod == mod {
		return nil
	}
	if m.mod != nil {
		return errSharedMeter
	}
	g, ok := mod.ExportedGlobal(FuelExport).(api.MutableGlobal)
	if !ok {
		return fmt.Errorf("meter: module %q does not export the mutable global %q", mod.Name(), FuelExport)
	}
	m.mod, m.counter = mod, g
	g.Set(0)
	return nil
}

// refill checks the budget, then the deadline, and grants the next slice.
// The budget comes first so that a call that is both out of fuel and late
// fails the same way everywhere.
func (m *Meter) refill(ctx context.Context) error {
	fuel, depth := m.read()
	consumed := m.granted - fuel
	if consumed > m.budget {
		return fmt.Errorf("%w after %d units", ErrOutOfFuel, consumed)
	}
	if err := ctx.Err(); err != nil {
		return contextError(err)
	}
	next := min(m.slice, m.budget-consumed)
	m.granted = consumed + next
	m.counter.Set(uint64(next<<depthBits | depth))
	return nil
}

func contextError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrDeadline, err)
	}
	return fmt.Errorf("meter: guest call canceled: %w", err)
}
