package sandbox

import (
	"log/slog"
	"runtime"
	"time"
)

// Limits bound one tool call. A zero field means "use the sandbox default".
type Limits struct {
	// Timeout is the wall-clock deadline of a call, counted from the moment
	// Call is entered, less the time spent compiling the tool's code if it
	// was not loaded: time spent queued for admission counts.
	Timeout time.Duration
	// MemoryPages caps linear memory, in 64 KiB pages. It is also what a
	// call reserves from the sandbox's total while it runs.
	MemoryPages uint32
	// StdoutBytes and StderrBytes cap what a call may write; a call that
	// writes more fails.
	StdoutBytes int
	StderrBytes int
	// Fuel bounds the instructions a call may execute, in the units of the
	// cost model (wasmtools/meter): about one per WebAssembly operator.
	Fuel uint64
}

// DefaultLimits are safe for a small edge board.
var DefaultLimits = Limits{
	Timeout: 30 * time.Second,
	// Ten billion operators: seconds of compute, far more than a Go tool's
	// start-up (a few million), so the timeout is usually what binds.
	Fuel:        10_000_000_000,
	MemoryPages: 1024, // 64 MiB
	StdoutBytes: 1 << 20,
	StderrBytes: 64 << 10,
}

// orDefault fills the zero fields of l from d.
func (l Limits) orDefault(d Limits) Limits {
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	if l.MemoryPages == 0 {
		l.MemoryPages = d.MemoryPages
	}
	if l.StdoutBytes <= 0 {
		l.StdoutBytes = d.StdoutBytes
	}
	if l.StderrBytes <= 0 {
		l.StderrBytes = d.StderrBytes
	}
	if l.Fuel == 0 {
		l.Fuel = d.Fuel
	}
	return l
}

// overriddenBy returns l with every non-zero field of o put in its place.
func (l Limits) overriddenBy(o Limits) Limits { return o.orDefault(l) }

// atMost lowers each field of l that is above max's to max's.
func (l Limits) atMost(most Limits) Limits {
	l.Timeout = capped(l.Timeout, most.Timeout)
	l.MemoryPages = capped(l.MemoryPages, most.MemoryPages)
	l.StdoutBytes = capped(l.StdoutBytes, most.StdoutBytes)
	l.StderrBytes = capped(l.StderrBytes, most.StderrBytes)
	l.Fuel = capped(l.Fuel, most.Fuel)
	return l
}

// capped is v, but no more than most where most is set.
func capped[T time.Duration | uint32 | int | uint64](v, most T) T {
	if most > 0 && v > most {
		return most
	}
	return v
}

// DefaultMaxReservedMemory bounds the memory concurrent calls may reserve,
// unless WithMaxReservedMemory says otherwise: four calls at the default
// limit.
const DefaultMaxReservedMemory = 4 * 1024 * pageSize

// Config configures a Sandbox. It is immutable: each With method returns a
// copy. Start from NewConfig; a zero Config gets its defaults.
type Config struct {
	limits            Limits
	cacheDir          string
	cacheMaxAge       time.Duration
	cacheMaxBytes     int64
	log               *slog.Logger
	reproducible      bool
	unloadAfter       time.Duration
	maxCalls          int
	maxReservedMemory uint64
}

// NewConfig returns a Config with DefaultLimits, at most GOMAXPROCS calls
// at once, DefaultMaxReservedMemory and no compile cache.
func NewConfig() Config {
	return Config{
		limits:            DefaultLimits,
		maxCalls:          runtime.GOMAXPROCS(0),
		maxReservedMemory: DefaultMaxReservedMemory,
	}
}

// orDefault fills the fields of a Config that was not built by NewConfig.
func (c Config) orDefault() Config {
	d := NewConfig()
	if c.limits == (Limits{}) {
		c.limits = d.limits
	}
	if c.maxCalls <= 0 {
		c.maxCalls = d.maxCalls
	}
	if c.maxReservedMemory == 0 {
		c.maxReservedMemory = d.maxReservedMemory
	}
	if c.unloadAfter == 0 {
		c.unloadAfter = DefaultUnloadAfter
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c
}

// WithLimits sets the default limits of every call; zero fields keep
// DefaultLimits. MemoryPages here is also the ceiling no tool can raise.
func (c Config) WithLimits(l Limits) Config {
	c.limits = l.orDefault(DefaultLimits)
	return c
}

// WithCacheDir keeps compiled modules on disk under dir, so that a restart
// does not compile them again. dir is created with mode 0700: whoever can
// write there chooses the machine code this process runs.
func (c Config) WithCacheDir(dir string) Config {
	c.cacheDir = dir
	return c
}

// WithCacheLimits bounds the compile cache, which Sandbox.PruneCache
// keeps to them: an entry whose module no tool has loaded for longer than
// maxAge goes, and while the cache holds more than maxBytes, the entries
// of modules no tool has loaded go, the least recently loaded first. 0
// is no limit, the default: then only modules whose file is gone leave.
func (c Config) WithCacheLimits(maxAge time.Duration, maxBytes int64) Config {
	c.cacheMaxAge, c.cacheMaxBytes = maxAge, maxBytes
	return c
}

// WithLogger logs what the sandbox does on its own: each removal from the
// compile cache, with its reason. Default: nothing is logged.
func (c Config) WithLogger(l *slog.Logger) Config {
	c.log = l
	return c
}

// DefaultUnloadAfter is how long a tool's compiled code stays in memory
// after its last call.
const DefaultUnloadAfter = 5 * time.Minute

// WithUnloadAfter sets how long a tool's compiled code stays in memory
// after its last call; the next call compiles it again, from the compile
// cache when there is one (about a tenth of a second for a Go tool). 0
// keeps DefaultUnloadAfter; negative keeps code until the tool is closed.
func (c Config) WithUnloadAfter(d time.Duration) Config {
	c.unloadAfter = d
	return c
}

// WithReproducible gives every call the same clocks and randomness: wall
// and monotonic clocks that start at a fixed instant and advance 1 ms per
// reading, sleeps that return at once, and a fixed random sequence. A
// call that starts from a snapshot carries on with them from where the
// tool's initialization left them, as a plain start would. A call's fuel
// count then depends only on its module and parameters, the same on
// every run and every device. Off by default: tools see the real
// time, sleep for real and get cryptographic randomness, and a Go tool's
// runtime reads them, so its fuel varies a little from run to run.
func (c Config) WithReproducible(on bool) Config {
	c.reproducible = on
	return c
}

// WithMaxConcurrentCalls bounds how many calls run at once; the rest queue
// in arrival order, their deadlines running. n <= 0 keeps the default,
// GOMAXPROCS.
func (c Config) WithMaxConcurrentCalls(n int) Config {
	if n > 0 {
		c.maxCalls = n
	}
	return c
}

// WithMaxReservedMemory bounds the linear memory that running calls may
// reserve together, in bytes. Each call reserves its memory limit while
// it runs, so a call that would exceed the total waits for others to end.
// 0 keeps the default.
func (c Config) WithMaxReservedMemory(bytes uint64) Config {
	if bytes > 0 {
		c.maxReservedMemory = bytes
	}
	return c
}
