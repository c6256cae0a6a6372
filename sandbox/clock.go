package sandbox

import (
	"io"
	"math/rand"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"
)

// fakeEpoch is the first wall-clock reading a reproducible run gets, as
// wazero's fake clock gives it: midnight UTC, 2022-01-01.
const fakeEpoch = 1640995200 * int64(time.Second)

// fakeRandSeed seeds the random bytes of a reproducible run, as wazero's
// fake source is seeded.
const fakeRandSeed = 42

// fakeTime is what a reproducible run has read of its clocks and random
// source: both clocks advance a millisecond per reading, sleeps return at
// once, and the random bytes are a fixed sequence, as wazero's fakes do.
// A run from a snapshot carries on from where initialization left them,
// so that it reads what a plain start would have read after initializing,
// and spends the same fuel.
type fakeTime struct {
	walls, nanos int64 // readings of each clock so far
	random       int64 // random bytes read so far
}

// withFakeTime gives cfg clocks and randomness that carry on from f, and
// counts in f what the run reads of them.
func withFakeTime(cfg wazero.ModuleConfig, f *fakeTime) wazero.ModuleConfig {
	src := rand.New(rand.NewSource(fakeRandSeed))
	io.CopyN(io.Discard, src, f.random) // a math/rand stream is the same however it is read
	return cfg.
		WithWalltime(f.walltime, sys.ClockResolution(time.Microsecond)).
		WithNanotime(f.nanotime, 1).
		WithNanosleep(func(int64) {}).
		WithRandSource(&countingReader{r: src, n: &f.random})
}

func (f *fakeTime) walltime() (int64, int32) {
	t := fakeEpoch + f.walls*int64(time.Millisecond)
	f.walls++
	return t / int64(time.Second), int32(t % int64(time.Second))
}

func (f *fakeTime) nanotime() int64 {
	t := f.nanos * int64(time.Millisecond)
	f.nanos++
	return t
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n *int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}
