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

func FuzzDecodeCBOR(f *testing.F) {
	for _, g := range loadGolden(f) {
		f.Add(g.cbor)
	}
	for _, s := range hostileSeeds {
		if v, err := parseJSON([]byte(s)); err == nil {
			b, err := transcodeEnc.Marshal(v)
			require.NoError(f, err)
			f.Add(b)
		}
	}
	f.Add([]byte{0xa1, 0x64, 't', 'y', 'p', 'e', 0xf7})            // undefined
	f.Add([]byte{0xa1, 0x64, 't', 'y', 'p', 'e', 0xc1, 0x00})      // a tag
	f.Add([]byte{0xbf, 0x64, 't', 'y', 'p', 'e', 0x61, 'x', 0xff}) // indefinite map
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
// encoding and comes back the same.
func fuzzDecode(t *testing.T, enc Encoding, data []byte) {
	for _, newMsg := range []func() Message{
		func() Message { return &ClientMessage{} },
		func() Message { return &ServerMessage{} },
	} {
		m := newMsg()
		if err := enc.Unmarshal(data, m); err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			continue
		}
		require.NoError(t, checkUTF8(m), "whatever decodes can be sent")

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
