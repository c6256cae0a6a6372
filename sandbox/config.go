package sandbox

import "time"

// Limits bound one tool call. A zero field means "use the sandbox default".
type Limits struct {
	// Timeout is the wall-clock deadline of a call.
	Timeout time.Duration
	// MemoryPages caps linear memory, in 64 KiB pages.
	MemoryPages uint32
	// StdoutBytes and StderrBytes cap what a call may write; a call that
	// writes more fails.
	StdoutBytes int
	StderrBytes int
}

// DefaultLimits are safe for a small edge board.
var DefaultLimits = Limits{
	Timeout:     30 * time.Second,
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
	return l
}

// Config configures a Sandbox. It is immutable: each With method returns a
// copy. The zero value is not usable; start from NewConfig.
type Config struct {
	limits   Limits
	mounts   []Mount
	cacheDir string
}

// NewConfig returns a Config with DefaultLimits and no mounts.
func NewConfig() Config { return Config{limits: DefaultLimits} }

// WithLimits sets the default limits of every call; zero fields keep
// DefaultLimits. MemoryPages here is also the ceiling no tool can raise.
func (c Config) WithLimits(l Limits) Config {
	c.limits = l.orDefault(DefaultLimits)
	return c
}

// WithMounts sets the host directories tools may see. Without mounts a tool
// has no filesystem at all.
func (c Config) WithMounts(m ...Mount) Config {
	c.mounts = append([]Mount(nil), m...)
	return c
}

// WithCacheDir keeps compiled modules on disk in dir, so that a restart
// does not compile them again. dir is created with mode 0700.
func (c Config) WithCacheDir(dir string) Config {
	c.cacheDir = dir
	return c
}
