// Command gorand is a test fixture: a Go tool in the reactor form that
// returns random numbers from math/rand/v2 and crypto/rand, and the
// iteration order of a map made in the call. Two calls started from one
// snapshot must return different numbers: the runtime's random state is
// reseeded before each call.
package main

import (
	"crypto/rand"
	"encoding/hex"
	mrand "math/rand/v2"

	"github.com/edgeaip/edgeaip/wasmtools/sdk/reactor"
)

func init() { reactor.Handle(draw) }

func main() {}

func draw(struct{}) (any, error) {
	b := make([]byte, 16)
	rand.Read(b)
	m := map[int]bool{}
	for i := range 16 {
		m[i] = true
	}
	var order []int
	for k := range m {
		order = append(order, k)
	}
	return map[string]any{"math_rand": mrand.Uint64(), "crypto_rand": hex.EncodeToString(b), "map_order": order}, nil
}
