//go:build go1.26 && !go1.27

package reactor

import (
	"crypto/rand"
	"errors"
	"unsafe"
)

// globalRand is the Go runtime's global random generator, which seeds
// each M's (runtime/rand.go), as Go 1.26 lays it out on wasm: a mutex
// (one uintptr), the seed it clears once used, the chacha8rand.State and
// the flag that says it was initialized.
//
//go:linkname globalRand runtime.globalRand
var globalRand struct {
	lock  uintptr
	seed  [32]byte
	state chacha8State
	init  bool
}

// chacha8State is internal/chacha8rand.State.
type chacha8State struct {
	buf     [32]uint64
	seed    [4]uint64
	i, n, c uint32
}

//go:linkname stateInit internal/chacha8rand.(*State).Init
func stateInit(s *chacha8State, seed [32]byte)

//go:linkname acquirem runtime.acquirem
func acquirem() unsafe.Pointer

//go:linkname releasem runtime.releasem
func releasem(mp unsafe.Pointer)

//go:linkname mrandinit runtime.mrandinit
func mrandinit(mp unsafe.Pointer)

var errLayout = errors.New("the Go runtime's random state is not laid out as this package expects: rebuild with the Go version it was written for (1.26)")

// reseed seeds the runtime's global generator from the host's randomness,
// as the runtime's start-up does, and the running M's generator from it,
// as the runtime does for a new M: math/rand/v2, map seeds and the
// scheduler then draw numbers no earlier call drew. It first checks that
// the global generator is where and what it expects, initialized and with
// its seed cleared, so that a runtime laid out otherwise gets an error,
// not a corrupted variable. The module runs one goroutine at a time, and
// nothing else runs during the call.
func reseed() error {
	if globalRand.lock != 0 || !globalRand.init || globalRand.seed != [32]byte{} || globalRand.state.n > 32 {
		return errLayout
	}
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return err
	}
	stateInit(&globalRand.state, seed)
	mp := acquirem()
	mrandinit(mp)
	releasem(mp)
	return nil
}
