package protocol

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Differential tests: the fast encoder must write exactly cborEnc's bytes,
// and the fast decoder must either give up or produce exactly what the
// strict decoder produces. fuzzDecode (fuzz_test.go) applies the same
// checks to every fuzz input.

// newMessages makes an empty message of each kind.
var newMessages = []func() Message{
	func() Message { return &ServerMessage{} },
	func() Message { return &ClientMessage{} },
}

// requireFastDecodeMatches decodes a CBOR frame with both decoders and
// reports whether the fast one took it.
func requireFastDecodeMatches(t testing.TB, data []byte, newMsg func() Message) bool {
	t.Helper()
	fast, strict := newMsg(), newMsg()
	if !decodeFast(data, fast) {
		return false
	}
	require.NoError(t, decodeStrict(data, strict), "the fast decoder took a frame the strict one refuses: %x", data)
	require.Equal(t, strict, fast, "%x", data)
	// Equal takes -0.0 for 0.0; their encodings differ.
	want, err := cborEnc.Marshal(strict)
	require.NoError(t, err)
	got, err := cborEnc.Marshal(fast)
	require.NoError(t, err)
	require.Equal(t, want, got, "%x", data)
	return true
}

// requireFastEncodeMatches encodes v with both encoders.
func requireFastEncodeMatches(t testing.TB, v any) {
	t.Helper()
	want, wantErr := cborEnc.Marshal(v)
	got, err := marshalCBOR(v)
	if wantErr != nil {
		require.Error(t, err, "cborEnc refuses %#v", v)
		return
	}
	require.NoError(t, err)
	if i := firstDifference(got, want); i >= 0 {
		require.Failf(t, "the fast encoder writes other bytes",
			"first difference at byte %d:\n got …%x\nwant …%x", i, window(got, i), window(want, i))
	}
}

// firstDifference returns the offset of the first byte where a and b
// differ, or -1.
func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// window is up to 32 bytes of b from i.
func window(b []byte, i int) []byte { return b[i:min(len(b), i+32)] }

func TestFastDecoderTakesEveryGoldenFrame(t *testing.T) {
	for _, g := range loadGolden(t) {
		fromUFO, err := JSON.asCBOR(g.ufoJSON)
		require.NoError(t, err)
		for _, frame := range [][]byte{g.cbor, fromUFO} {
			require.True(t, requireFastDecodeMatches(t, frame, g.newMessage), "%s: %x", g.name, frame)
		}
	}
	for i, m := range []Message{benchCommand(), benchResults()} {
		frame, err := CBOR.Marshal(m)
		require.NoError(t, err)
		require.True(t, requireFastDecodeMatches(t, frame, newMessages[i]), "%x", frame)
	}
}

func TestFastEncoderMatchesCBOREncoder(t *testing.T) {
	r := testRand(t)
	for range roundTrips {
		requireFastEncodeMatches(t, withExoticValues(r, randServerMessage(r)))
		requireFastEncodeMatches(t, withExoticValues(r, randClientMessage(r)))
	}
	requireFastEncodeMatches(t, (*ServerMessage)(nil))
	requireFastEncodeMatches(t, ClientMessage{Type: ClientHeartbeat}) // not a pointer: cborEnc's
	requireFastEncodeMatches(t, &ServerMessage{Result: make(chan int)})
	requireFastEncodeMatches(t, &ServerMessage{}) // required fields are sent even when empty
}

// withExoticValues puts values the fast encoder hands to cborEnc, or
// writes at the edges of CBOR's forms, into some of m's free-form fields.
func withExoticValues(r *rand.Rand, m Message) Message {
	put := func(p *any) {
		if r.IntN(2) == 0 {
			*p = exoticValue(r, 2)
		}
	}
	putIn := func(p *map[string]any) {
		if r.IntN(2) == 0 {
			if *p == nil {
				*p = map[string]any{}
			}
			(*p)[randString(r)] = exoticValue(r, 2)
		}
	}
	switch m := m.(type) {
	case *ServerMessage:
		put(&m.Result)
		for i := range m.Actions {
			putIn(&m.Actions[i].Parameters)
		}
	case *ClientMessage:
		putIn(&m.Metadata)
		for i := range m.ActionResults {
			put(&m.ActionResults[i].Result)
		}
	}
	return m
}

// exoticValue is any Go value a caller might put in a free-form field.
func exoticValue(r *rand.Rand, depth int) any {
	vals := []any{
		int(-25), int8(-128), int16(300), int32(-70000), uint(7), uint8(255), uint16(65535), uint32(1 << 31),
		uint64(math.MaxUint64), int64(math.MinInt64), int64(23), int64(24), int64(-24), int64(-25), int64(255), int64(256),
		int64(65535), int64(65536), int64(math.MaxUint32), int64(math.MaxUint32 + 1),
		float32(1.5), float32(math.Pi), math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0.0,
		65504.0, 65505.0, 1e-7, math.SmallestNonzeroFloat64, 5.960464477539063e-08, 6.103515625e-05, 3.4028234663852886e+38, 1e39,
		strings.Repeat("x", 23), strings.Repeat("y", 24), strings.Repeat("z", 256), strings.Repeat("é", 40000),
		[]byte("raw"), []string{"a", "b"}, map[string]string{"k": "v", "kk": "w"}, map[string]int{"b": 1, "a": 2},
		ToolAction, Usage{Fuel: 1}, &Usage{Fuel: 2}, (*Usage)(nil), []any(nil), map[string]any(nil),
		time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC), struct{ A int }{3},
	}
	switch r.IntN(4) {
	case 0:
		if depth > 0 {
			return []any{exoticValue(r, depth-1), randValue(r, 1)}
		}
	case 1:
		if depth > 0 {
			return exoticMap(r, depth-1)
		}
	}
	return vals[r.IntN(len(vals))]
}

// exoticMap has keys whose order is easy to get wrong: lengths across the
// head forms, bytes above 0x7f, prefixes of each other.
func exoticMap(r *rand.Rand, depth int) map[string]any {
	keys := []string{"", "a", "b", "aa", "ab", "Z", "é", "\x7f", "ü", strings.Repeat("k", 23), strings.Repeat("k", 24),
		strings.Repeat("a", 255), strings.Repeat("a", 256), "a\x00", "a\xff"}
	m := map[string]any{}
	for range 1 + r.IntN(len(keys)) {
		m[keys[r.IntN(len(keys))]] = exoticValue(r, depth)
	}
	return m
}

// TestFastDecoderMatchesStrictDecoderOnDamagedFrames decodes random
// messages, and those frames damaged, with both decoders.
func TestFastDecoderMatchesStrictDecoderOnDamagedFrames(t *testing.T) {
	r := testRand(t)
	var frames [][]byte
	for _, g := range loadGolden(t) {
		frames = append(frames, g.cbor)
	}
	for range roundTrips {
		for _, m := range []Message{randServerMessage(r), randClientMessage(r)} {
			b, err := CBOR.Marshal(m)
			require.NoError(t, err)
			frames = append(frames, b)
		}
	}
	var took int
	for _, frame := range frames {
		for _, newMsg := range newMessages {
			if requireFastDecodeMatches(t, frame, newMsg) {
				took++
			}
			for range 5 {
				requireFastDecodeMatches(t, damage(r, frame), newMsg)
			}
		}
	}
	require.GreaterOrEqual(t, took, len(frames), "every undamaged frame takes the fast path as one kind or the other")
}

// damage returns a copy of b with one random change.
func damage(r *rand.Rand, b []byte) []byte {
	b = append([]byte(nil), b...)
	i := r.IntN(len(b))
	switch r.IntN(4) {
	case 0:
		b[i] ^= 1 << r.IntN(8)
	case 1:
		b[i] = byte(r.IntN(256))
	case 2:
		return b[:i]
	default:
		return append(b[:i], b[i+1:]...)
	}
	return b
}
