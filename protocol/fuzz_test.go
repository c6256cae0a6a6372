package protocol

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The fuzz targets run their seeds with every `go test`; `make fuzz` runs
// each with -fuzz for FUZZTIME. The seeds are the golden vectors in
// testdata/protocol, and the hostile frames in testdata/fuzz/<target>
// (described in testdata/fuzz/README.md), where the fuzzer also keeps what
// it finds.

func FuzzDecodeCBOR(f *testing.F) {
	for _, g := range loadGolden(f) {
		f.Add(g.cbor)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzDecode(t, CBOR, data) })
}

func FuzzDecodeJSON(f *testing.F) {
	for _, g := range loadGolden(f) {
		f.Add(g.ufoJSON)
		f.Add(g.ourJSON)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzDecode(t, JSON, data) })
}

// fuzzDecode checks, for both message kinds, that data is refused as
// malformed or decodes to a message that can be sent on in either
// encoding and comes back the same; and that the fast decoder and encoder
// agree with the strict decoder and cborEnc.
func fuzzDecode(t *testing.T, enc Encoding, data []byte) {
	asCBOR, cborErr := enc.asCBOR(data)
	for _, newMsg := range newMessages {
		if cborErr == nil {
			requireFastDecodeMatches(t, asCBOR, newMsg)
		}
		m := newMsg()
		if err := enc.Unmarshal(data, m); err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			continue
		}
		require.NoError(t, checkUTF8(m), "whatever decodes can be sent")
		requireFastEncodeMatches(t, m)

		b1, err := CBOR.Marshal(m)
		require.NoError(t, err)
		viaCBOR := newMsg()
		require.NoError(t, CBOR.Unmarshal(b1, viaCBOR), "%x", b1)
		require.Equal(t, m, viaCBOR, "CBOR keeps the message exactly")
		b2, err := CBOR.Marshal(viaCBOR)
		require.NoError(t, err)
		require.Equal(t, b1, b2, "CBOR encoding is deterministic")

		// JSON may turn a float such as 1.0 into the integer 1 once;
		// after that the message must stay as it is.
		j1, err := JSON.Marshal(m)
		require.NoError(t, err)
		once := newMsg()
		require.NoError(t, JSON.Unmarshal(j1, once), "%s", j1)
		j2, err := JSON.Marshal(once)
		require.NoError(t, err)
		twice := newMsg()
		require.NoError(t, JSON.Unmarshal(j2, twice), "%s", j2)
		require.Equal(t, once, twice, "%s", j2)
	}
}
