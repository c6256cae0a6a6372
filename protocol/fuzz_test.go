package protocol

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fuzz targets run their seeds with every `go test`; `make fuzz` runs
// each with -fuzz for FUZZTIME. The seeds are the golden vectors in
// testdata/protocol and the small hostile frames below.

var hostileSeeds = []string{
	`{"status":"ok"}`,
	`{"type":"heartbeat","status":"sleepy"}`,
	`{"type":"heartbeat","type":"heartbeat","status":"ok"}`,
	`{"type":"command","status":"continue","actions":[{"tool_name":"x","tool_type":"magic"},null]}`,
	`{"type":"command_results","status":"ok","action_results":[{"status":"success","result":-0.0,"usage":{"fuel":18446744073709551615}}]}`,
	`{"type":"heartbeat","status":"ok","metadata":{"a":[[[[{"b":1e308}]]]],"c":"\u0000\ud800"}}`,
	"{\"type\":\"heartbeat\",\"status\":\"ok\",\"error\":\"\xff\"}",
	`{"Type":"heartbeat","STATUS":"ok"}`,
}

// fastPathSeeds are CBOR frames at the edges of what the fast decoder
// takes.
var fastPathSeeds = [][]byte{
	{0xa1, 0x64, 't', 'y', 'p', 'e', 0xf7},                                         // undefined
	{0xa1, 0x64, 't', 'y', 'p', 'e', 0xc1, 0x00},                                   // a tag
	{0xbf, 0x64, 't', 'y', 'p', 'e', 0x61, 'x', 0xff},                              // indefinite map
	heartbeatWith(0x78, 0x01, 'x', 0x19, 0x00, 0x05),                               // heads longer than they need be
	heartbeatWith(0x61, 'x', 0xf9, 0x00, 0x01),                                     // the smallest half-precision subnormal
	heartbeatWith(0x61, 'x', 0xf9, 0x80, 0x00),                                     // -0.0
	heartbeatWith(0x61, 'x', 0xf8, 0x20),                                           // a one-byte simple value
	heartbeatWith(0x61, 'x', 0x41, 0x00),                                           // a byte string
	heartbeatWith(0x61, 'x', 0xa2, 0x61, 'k', 0x01, 0x61, 'k', 0x02),               // a duplicate key inside an unknown field
	heartbeatWith(0x61, 'x', 0xa1, 0x01, 0x01),                                     // an integer key inside an unknown field
	heartbeatWith(0x61, 'x', 0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), // beyond int64 in an unknown field
	heartbeatWith(0x68, 'm', 'e', 't', 'a', 'd', 'a', 't', 'a', 0xa1, 0x61, 'k', 0x3b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), // MinInt64
}

// heartbeatWith is a heartbeat frame with one more pair appended.
func heartbeatWith(pair ...byte) []byte {
	b := cborMap(cborText("type"), cborText("heartbeat"), cborText("status"), cborText("ok"))
	b[0]++ // one pair more
	return append(b, pair...)
}

func FuzzDecodeCBOR(f *testing.F) {
	for _, g := range loadGolden(f) {
		f.Add(g.cbor)
	}
	for _, s := range hostileSeeds {
		if b, err := JSON.asCBOR([]byte(s)); err == nil {
			f.Add(b)
		}
	}
	for _, b := range fastPathSeeds {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzDecode(t, CBOR, data) })
}

func FuzzDecodeJSON(f *testing.F) {
	for _, g := range loadGolden(f) {
		f.Add(g.ufoJSON)
		f.Add(g.ourJSON)
	}
	for _, s := range hostileSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(strings.Repeat("[", MaxDepth+1)))
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
