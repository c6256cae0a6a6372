package protocol

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/require"
)

// TestKinds checks the generated code for Kinds as cbor_fast_test.go
// checks it for the messages: the fast encoder writes cborEnc's bytes, and
// the fast decoder takes every frame either writes and decodes it as the
// strict decoder does, with null in any field or element.
func TestKinds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		k := randKinds(r, 2)
		want, err := cborEnc.Marshal(k)
		require.NoError(t, err)
		got, err := marshalCBOR(k)
		require.NoError(t, err)
		require.Equal(t, want, got, "%#v", k)
		requireSameDecode(t, got)
		requireSameDecode(t, withNulls(t, r, got))
	}
}

func requireSameDecode(t *testing.T, frame []byte) {
	t.Helper()
	fast, strict := new(Kinds), new(Kinds)
	require.True(t, decodeFast(frame, fast), "the fast decoder gave up on %x", frame)
	require.NoError(t, decodeStrict(frame, strict), "%x", frame)
	require.Equal(t, strict, fast, "%x", frame)
}

// withNulls re-encodes a frame of Kinds with null in some of its fields.
func withNulls(t *testing.T, r *rand.Rand, frame []byte) []byte {
	var m map[string]cbor.RawMessage
	require.NoError(t, cborDec.Unmarshal(frame, &m))
	for key := range m {
		if r.IntN(3) == 0 {
			m[key] = cbor.RawMessage{cborNull}
		}
	}
	b, err := cborEnc.Marshal(m)
	require.NoError(t, err)
	return b
}

func randKinds(r *rand.Rand, depth int) *Kinds {
	return &Kinds{
		Text: randText(r), OptText: randText(r), Label: Label(randText(r)),
		Color:  pickOne[Color](r, "", "red", "green", "blue"),
		Colors: randList(r, func() Color { return pickOne[Color](r, "red", "blue") }),
		U32:    pickOne[uint32](r, 0, 1, 23, 24, math.MaxUint32), U64: pickOne[uint64](r, 0, 255, 256, math.MaxUint64),
		I64: pickOne[int64](r, 0, -1, -24, -25, math.MinInt64, math.MaxInt64),
		Any: randAny(r, depth), OptAny: randAny(r, depth),
		Map: randMap(r, depth), OptMap: randMap(r, depth),
		Strings: randList(r, func() string { return randText(r) }),
		Maps:    randList(r, func() map[string]any { return randMap(r, depth-1) }),
		Nested: randList(r, func() []int64 {
			return randList(r, func() int64 { return pickOne[int64](r, 0, -300, 70000) })
		}),
		Items: randList(r, func() Item { return newItem(r, depth) }),
		Ptr:   randItem(r, depth), OptPtr: randItem(r, depth),
		Ptrs: randList(r, func() *Item { return randItem(r, depth) }),
		Long: randText(r),
	}
}

// randItem is nil or an Item.
func randItem(r *rand.Rand, depth int) *Item {
	if depth == 0 || r.IntN(3) == 0 {
		return nil
	}
	it := newItem(r, depth)
	return &it
}

func newItem(r *rand.Rand, depth int) Item {
	return Item{Name: randText(r), Self: randItem(r, depth-1), Both: randList(r, func() string { return randText(r) })}
}

func pickOne[T any](r *rand.Rand, vs ...T) T { return vs[r.IntN(len(vs))] }

func randText(r *rand.Rand) string {
	return pickOne(r, "", "a", "Zürich ✓", "a string of more than 23 bytes")
}

// randList is nil, empty or filled: all three differ on the wire.
func randList[T any](r *rand.Rand, elem func() T) []T {
	switch r.IntN(3) {
	case 0:
		return nil
	case 1:
		return []T{}
	}
	s := make([]T, 1+r.IntN(3))
	for i := range s {
		s[i] = elem()
	}
	return s
}

func randMap(r *rand.Rand, depth int) map[string]any {
	switch r.IntN(3) {
	case 0:
		return nil
	case 1:
		return map[string]any{}
	}
	return map[string]any{randText(r): randAny(r, depth-1), "k": randAny(r, depth-1)}
}

func randAny(r *rand.Rand, depth int) any {
	vs := []any{nil, false, true, int64(-7), int64(1 << 40), 0.5, 1e300, "", "text", []any{}}
	if depth > 0 {
		vs = append(vs, []any{randAny(r, depth-1), randAny(r, depth-1)}, map[string]any{"x": randAny(r, depth-1)})
	}
	return pickOne(r, vs...)
}
