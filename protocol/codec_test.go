package protocol

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleCommand() *ServerMessage {
	return &ServerMessage{
		Type: ServerCommand, Status: StatusContinue, SessionID: "s-1", ResponseID: "r-1", Timestamp: "2026-11-21T08:00:00Z",
		Actions: []Command{{ToolName: "hash_file", ToolType: ToolDataCollection, CallID: "c-1", Parameters: map[string]any{"path": "/data/x"}}},
	}
}

func TestCBORIsDeterministic(t *testing.T) {
	m := sampleCommand()
	m.Actions[0].Parameters = map[string]any{"b": int64(1), "a": "x", "cc": []any{true}, "d": map[string]any{"z": nil, "y": 2.5}}
	a, err := CBOR.Marshal(m)
	require.NoError(t, err)
	for range 20 {
		b, err := CBOR.Marshal(m)
		require.NoError(t, err)
		assert.Equal(t, a, b, "map iteration order must not leak into the bytes")
	}
}

// frame is one input in both encodings: JSON text, and the CBOR bytes for
// the same data (built from the JSON, or written by hand where JSON cannot
// say it).
type frame struct {
	json string
	cbor []byte
}

// both encodes the same data for both encodings through the JSON parser.
func both(t testing.TB, j string) frame {
	t.Helper()
	v, err := parseJSON([]byte(j))
	require.NoError(t, err, j)
	b, err := cbor.Marshal(v)
	require.NoError(t, err)
	return frame{json: j, cbor: b}
}

func (f frame) in(e Encoding) []byte {
	if e == CBOR {
		return f.cbor
	}
	return []byte(f.json)
}

var encodings = []Encoding{CBOR, JSON}

// cborMap hand-writes a CBOR map of n pairs, for what JSON cannot express
// or the JSON parser would refuse before the CBOR test could start.
func cborMap(pairs ...[]byte) []byte {
	out := []byte{0xa0 + byte(len(pairs)/2)}
	for _, p := range pairs {
		out = append(out, p...)
	}
	return out
}

func cborText(s string) []byte { return append([]byte{0x60 + byte(len(s))}, s...) }

func TestDecodingRejectsWithThePreciseReason(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40)
	cases := map[string]struct {
		in   frame
		want string
	}{
		"missing type":                      {both(t, `{"status":"ok"}`), `field "type": missing`},
		"null type":                         {both(t, `{"type":null,"status":"ok"}`), `field "type": missing`},
		"missing status":                    {both(t, `{"type":"heartbeat"}`), `field "status": missing`},
		"unknown type":                      {both(t, `{"type":"dance","status":"ok"}`), `field "type": unknown value "dance"`},
		"unknown status":                    {both(t, `{"type":"heartbeat","status":"meh"}`), `field "status": unknown value "meh"`},
		"enum values are exact":             {both(t, `{"type":"heartbeat","status":"OK"}`), `field "status": unknown value "OK"`},
		"unknown client_type":               {both(t, `{"type":"heartbeat","status":"ok","client_type":"robot"}`), `field "client_type": unknown value "robot"`},
		"unknown result status":             {both(t, `{"type":"command_results","status":"ok","action_results":[{"status":"great"}]}`), `field "action_results[0].status": unknown value "great"`},
		"result without status":             {both(t, `{"type":"command_results","status":"ok","action_results":[{"status":"success"},{"result":1}]}`), `field "action_results[1].status": missing`},
		"wrong type":                        {both(t, `{"type":"heartbeat","status":"ok","client_id":5}`), `in field "client_id": want a string, got an integer`},
		"wrong nested type":                 {both(t, `{"type":"command_results","status":"ok","action_results":[{"status":"success","usage":{"fuel":"lots"}}]}`), `in field "action_results": want a non-negative integer, got a string`},
		"not an object":                     {both(t, `["type","heartbeat"]`), `want an object, got an array`},
		"too deep":                          {frame{`{"type":"heartbeat","status":"ok","metadata":` + deep + `}`, bigCBOR(t, `{"type":"heartbeat","status":"ok","metadata":`+deep+`}`)}, "nesting deeper than 32 levels"},
		"duplicate key":                     {frame{`{"type":"heartbeat","type":"heartbeat","status":"ok"}`, cborMap(cborText("type"), cborText("heartbeat"), cborText("type"), cborText("heartbeat"), cborText("status"), cborText("ok"))}, `duplicate key "type"`},
		"duplicate unknown key":             {frame{`{"type":"heartbeat","status":"ok","x":1,"x":2}`, cborMap(cborText("type"), cborText("heartbeat"), cborText("status"), cborText("ok"), cborText("x"), []byte{0x01}, cborText("x"), []byte{0x02})}, `duplicate key "x"`},
		"duplicate nested key":              {frame{`{"type":"heartbeat","status":"ok","metadata":{"k":1,"k":1}}`, cborMap(cborText("type"), cborText("heartbeat"), cborText("status"), cborText("ok"), cborText("metadata"), cborMap(cborText("k"), []byte{0x01}, cborText("k"), []byte{0x01}))}, `duplicate key "k"`},
		"duplicate key in an unknown field": {frame{`{"type":"heartbeat","status":"ok","future":[{"k":1,"k":2}]}`, heartbeatWith(append(cborText("future"), 0x81, 0xa2, 0x61, 'k', 0x01, 0x61, 'k', 0x02)...)}, `duplicate key "k"`},
		"invalid UTF-8 in an unknown field": {frame{"{\"type\":\"heartbeat\",\"status\":\"ok\",\"future\":{\"k\":\"\xff\"}}", heartbeatWith(append(cborText("future"), 0xa1, 0x61, 'k', 0x61, 0xff)...)}, "invalid UTF-8"},
		"invalid UTF-8":                     {frame{"{\"type\":\"heartbeat\",\"status\":\"ok\",\"error\":\"\xff\"}", cborMap(cborText("type"), cborText("heartbeat"), cborText("status"), cborText("ok"), cborText("error"), []byte{0x61, 0xff})}, "invalid UTF-8"},
		"invalid UTF-8 in a key":            {frame{"{\"type\":\"heartbeat\",\"status\":\"ok\",\"\xc3\":1}", cborMap(cborText("type"), cborText("heartbeat"), cborText("status"), cborText("ok"), []byte{0x61, 0xc3}, []byte{0x01})}, "invalid UTF-8"},
		"trailing data":                     {frame{`{"type":"heartbeat","status":"ok"} {}`, append(both(t, `{"type":"heartbeat","status":"ok"}`).cbor, 0xa0)}, "data after"},
		"truncated":                         {frame{`{"type":"heartbeat","status":"ok"`, both(t, `{"type":"heartbeat","status":"ok"}`).cbor[:10]}, "unexpected EOF"},
	}
	for name, c := range cases {
		for _, enc := range encodings {
			t.Run(name+"/"+enc.String(), func(t *testing.T) {
				var m ClientMessage
				err := enc.Unmarshal(c.in.in(enc), &m)
				require.ErrorIs(t, err, ErrMalformed)
				assert.ErrorContains(t, err, c.want)
			})
		}
	}
}

func TestCBOROutsideTheJSONDataModelIsRejected(t *testing.T) {
	head := [][]byte{cborText("type"), cborText("heartbeat"), cborText("status"), cborText("ok"), cborText("metadata")}
	withValue := func(v []byte) []byte {
		return cborMap(append(head, cborMap(cborText("v"), v))...)
	}
	for name, c := range map[string]struct {
		value []byte
		want  string
	}{
		"integer beyond int64": {[]byte{0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "integer out of range"},
		"NaN":                  {[]byte{0xf9, 0x7e, 0x00}, "NaN is not allowed"},
		"infinity":             {[]byte{0xf9, 0x7c, 0x00}, "infinity is not allowed"},
		"a tag":                {[]byte{0xc1, 0x1a, 0x65, 0x5d, 0x2b, 0x00}, "tag"},
		"undefined":            {[]byte{0xf7}, "simple value 23"},
		"an unassigned simple": {[]byte{0xf0}, "simple value 16"},
		"indefinite length":    {[]byte{0x9f, 0x01, 0xff}, "indefinite"},
	} {
		t.Run(name, func(t *testing.T) {
			var m ClientMessage
			err := CBOR.Unmarshal(withValue(c.value), &m)
			require.ErrorIs(t, err, ErrMalformed)
			assert.ErrorContains(t, err, c.want)
		})
	}
}

// JSON cannot say these; CBOR must not carry them in a field we do not
// know any more than in one we do.
func TestCBORKeysAreTextEverywhere(t *testing.T) {
	for name, in := range map[string][]byte{
		"at the top":           heartbeatWith(0x01, 0x01),
		"in an unknown field":  heartbeatWith(append(cborText("future"), 0xa1, 0x01, 0x01)...),
		"in a free-form value": heartbeatWith(append(cborText("metadata"), 0xa1, 0x61, 'k', 0xa1, 0x41, 'b', 0x01)...),
	} {
		var m ClientMessage
		err := CBOR.Unmarshal(in, &m)
		require.ErrorIs(t, err, ErrMalformed, name)
		assert.ErrorContains(t, err, "want a string, got", name)
	}
}

// nested returns a frame whose nesting is exactly depth levels, the frame
// itself included.
func nested(depth int) string {
	inner := strings.Repeat("[", depth-2) + strings.Repeat("]", depth-2)
	return `{"type":"heartbeat","status":"ok","metadata":{"v":` + inner + `}}`
}

func TestLimitsHoldAtTheirBoundInBothEncodings(t *testing.T) {
	array := func(n int) string {
		return `{"type":"heartbeat","status":"ok","metadata":{"a":[` + strings.TrimSuffix(strings.Repeat("0,", n), ",") + `]}}`
	}
	object := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"type":"heartbeat","status":"ok","metadata":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"k` + strconv.Itoa(i) + `":0`)
		}
		b.WriteString("}}")
		return b.String()
	}
	for _, c := range []struct {
		name      string
		ok, tooBy string
		want      string
	}{
		{"depth", nested(MaxDepth), nested(MaxDepth + 1), "nesting deeper than 32 levels"},
		{"array", array(MaxArrayElements), array(MaxArrayElements + 1), "array longer than 65536 elements"},
		{"map", object(MaxMapPairs), object(MaxMapPairs + 1), "map with more than 65536 pairs"},
	} {
		okFrame := both(t, c.ok)
		badCBOR := bigCBOR(t, c.tooBy)
		for _, enc := range encodings {
			t.Run(c.name+"/"+enc.String(), func(t *testing.T) {
				var m ClientMessage
				require.NoError(t, enc.Unmarshal(okFrame.in(enc), &m), "at the limit")
				bad := []byte(c.tooBy)
				if enc == CBOR {
					bad = badCBOR
				}
				err := enc.Unmarshal(bad, &m)
				require.ErrorIs(t, err, ErrMalformed, "one past the limit")
				assert.ErrorContains(t, err, c.want)
			})
		}
	}
}

// bigCBOR encodes JSON that our JSON parser refuses, through encoding/json.
func bigCBOR(t testing.TB, j string) []byte {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(j), &v))
	b, err := cbor.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestNullAbsentAndEmptyAreTreatedAsPydanticDoes(t *testing.T) {
	allNull := `{"type":"command_results","status":"ok","client_type":null,"session_id":null,"task_name":null,` +
		`"client_id":null,"target_id":null,"request":null,"action_results":[{"status":"success","error":null,` +
		`"result":null,"namespace":null,"call_id":null,"usage":null}],"timestamp":null,"request_id":null,` +
		`"prev_response_id":null,"error":null,"metadata":null}`
	absent := `{"type":"command_results","status":"ok","action_results":[{"status":"success"}]}`
	empty := `{"type":"command_results","status":"ok","action_results":[],"metadata":{}}`
	for _, enc := range encodings {
		var fromNull, fromAbsent, fromEmpty ClientMessage
		require.NoError(t, enc.Unmarshal(both(t, allNull).in(enc), &fromNull), enc)
		require.NoError(t, enc.Unmarshal(both(t, absent).in(enc), &fromAbsent), enc)
		require.NoError(t, enc.Unmarshal(both(t, empty).in(enc), &fromEmpty), enc)
		assert.Equal(t, fromAbsent, fromNull, "%s: null is absent", enc)
		assert.Equal(t, ClientDevice, fromNull.ClientType, "%s: client_type null gets the default", enc)
		assert.Nil(t, fromNull.Metadata, enc)
		assert.NotNil(t, fromEmpty.Metadata, "%s: {} is not null", enc)
		assert.NotNil(t, fromEmpty.ActionResults, "%s: [] is not null", enc)

		out, err := enc.Marshal(&fromEmpty)
		require.NoError(t, err)
		var again ClientMessage
		require.NoError(t, enc.Unmarshal(out, &again))
		assert.Equal(t, fromEmpty, again, "%s: empty survives a round trip as empty", enc)
	}
	var cmd ServerMessage
	require.NoError(t, JSON.Unmarshal([]byte(`{"type":"command","status":"continue","actions":[{"tool_name":"x","parameters":null,"tool_type":null,"call_id":null}]}`), &cmd))
	assert.Equal(t, []Command{{ToolName: "x"}}, cmd.Actions)
}

func TestFalsyResultsSurviveBothEncodings(t *testing.T) {
	for _, v := range []any{false, int64(0), "", []any{}, map[string]any{}, 0.5} {
		for _, enc := range encodings {
			in := &ClientMessage{Type: ClientCommandResults, Status: StatusOK, ClientType: ClientDevice,
				ActionResults: []Result{{Status: ResultSuccess, Result: v}}}
			b, err := enc.Marshal(in)
			require.NoError(t, err)
			assert.Contains(t, string(b), "result", "%s: result %#v is sent", enc, v)
			var out ClientMessage
			require.NoError(t, enc.Unmarshal(b, &out))
			assert.Equal(t, in, &out, "%s: result %#v", enc, v)
		}
	}
}

func TestKeysAreCaseSensitiveAsInPydantic(t *testing.T) {
	for _, enc := range encodings {
		var m ClientMessage
		require.NoError(t, enc.Unmarshal(both(t, `{"type":"heartbeat","Type":"task","status":"ok","CLIENT_ID":"x"}`).in(enc), &m))
		assert.Equal(t, ClientHeartbeat, m.Type, "%s: Type is an unknown key", enc)
		assert.Empty(t, m.ClientID, "%s: CLIENT_ID is not client_id", enc)
		err := enc.Unmarshal(both(t, `{"Type":"heartbeat","status":"ok"}`).in(enc), &m)
		assert.ErrorContains(t, err, `field "type": missing`, enc)
	}
}

func TestUnknownKeysAreIgnored(t *testing.T) {
	for _, enc := range encodings {
		var m ServerMessage
		require.NoError(t, enc.Unmarshal(both(t, `{"type":"heartbeat","status":"ok","future_field":[1,{"a":2}]}`).in(enc), &m))
		assert.Equal(t, ServerHeartbeat, m.Type)
	}
}

func TestCommandMayLeaveToolTypeOut(t *testing.T) {
	for _, enc := range encodings {
		var m ServerMessage
		require.NoError(t, enc.Unmarshal(both(t, `{"type":"command","status":"continue","actions":[{"tool_name":"x"}]}`).in(enc), &m))
		err := enc.Unmarshal(both(t, `{"type":"command","status":"continue","actions":[{"tool_name":"x","tool_type":"magic"}]}`).in(enc), &m)
		assert.ErrorContains(t, err, `field "actions[0].tool_type": unknown value "magic"`)
		err = enc.Unmarshal(both(t, `{"type":"command","status":"continue","actions":[{"tool_type":"action"}]}`).in(enc), &m)
		assert.ErrorContains(t, err, `field "actions[0].tool_name": missing`)
	}
}

func TestNumbersDecodeAlikeInBothEncodings(t *testing.T) {
	f := both(t, `{"type":"heartbeat","status":"ok","metadata":{"i":42,"neg":-7,"big":9223372036854775807,"f":0.25,"e":1e3,"huge":1e300}}`)
	want := map[string]any{"i": int64(42), "neg": int64(-7), "big": int64(math.MaxInt64), "f": 0.25, "e": 1000.0, "huge": 1e300}
	for _, enc := range encodings {
		var m ClientMessage
		require.NoError(t, enc.Unmarshal(f.in(enc), &m))
		assert.Equal(t, want, m.Metadata, enc)
	}
	for in, want := range map[string]string{
		`{"n":18446744073709551615}`: `in field "metadata": integer out of range`,
		`{"n":18446744073709551616}`: "integer 18446744073709551616: out of range",
		`{"n":-9223372036854775809}`: "integer -9223372036854775809: out of range",
		`{"n":1e999}`:                "number 1e999: out of range",
	} {
		var m ClientMessage
		err := JSON.Unmarshal([]byte(`{"type":"heartbeat","status":"ok","metadata":`+in+`}`), &m)
		assert.ErrorContains(t, err, want, "free-form integers must fit int64 in JSON as in CBOR")
	}
	var r Result
	require.NoError(t, JSON.UnmarshalValue([]byte(`{"status":"success","usage":{"fuel":18446744073709551615}}`), &r))
	assert.Equal(t, uint64(math.MaxUint64), r.Usage.Fuel, "a uint64 field takes all of uint64")
}

// An integral float64 leaves as an integer literal in JSON and comes back
// as int64: JSON cannot tell 1.0 from 1 once encoding/json has written it.
// CBOR keeps it a float.
func TestIntegralFloatsThroughJSON(t *testing.T) {
	in := &ServerMessage{Type: ServerTaskEnd, Status: StatusCompleted, Result: 2.0}
	b, err := JSON.Marshal(in)
	require.NoError(t, err)
	var viaJSON ServerMessage
	require.NoError(t, JSON.Unmarshal(b, &viaJSON))
	assert.Equal(t, int64(2), viaJSON.Result)

	b, err = CBOR.Marshal(in)
	require.NoError(t, err)
	var viaCBOR ServerMessage
	require.NoError(t, CBOR.Unmarshal(b, &viaCBOR))
	assert.Equal(t, 2.0, viaCBOR.Result)
}

func TestUnmarshalLeavesNothingOfTheLastMessage(t *testing.T) {
	for _, enc := range encodings {
		m := ClientMessage{ClientID: "stale", Metadata: map[string]any{"old": true}}
		require.NoError(t, enc.Unmarshal(both(t, `{"type":"heartbeat","status":"ok"}`).in(enc), &m))
		assert.Equal(t, ClientMessage{Type: ClientHeartbeat, Status: StatusOK, ClientType: ClientDevice}, m, enc)
	}
}

func TestJSONOutputIsCompactAndUnescapedAsPydanticWritesIt(t *testing.T) {
	b, err := JSON.Marshal(&ServerMessage{Type: ServerError, Status: StatusError, Error: "<a> & b — ✓"})
	require.NoError(t, err)
	assert.Equal(t, `{"type":"error","status":"error","error":"<a> & b — ✓"}`, string(b))
}

func TestUnmarshalValueParsesToolOutput(t *testing.T) {
	var v any
	require.NoError(t, JSON.UnmarshalValue([]byte(` {"size": 3, "names": ["a"]}`+"\n"), &v))
	assert.Equal(t, map[string]any{"size": int64(3), "names": []any{"a"}}, v)
	assert.Error(t, JSON.UnmarshalValue([]byte("not json"), &v))
	assert.ErrorContains(t, JSON.UnmarshalValue([]byte(`{"a":1,"a":2}`), &v), "duplicate key")

	var info SystemInfo
	require.NoError(t, JSON.UnmarshalValue([]byte(`{"device_id":"d","cpu_count":4,"memory_total_gb":1.5,"tools":[{"tool_key":"action::x","tool_name":"x","namespace":"n","tool_type":"action"}]}`), &info))
	assert.Equal(t, SystemInfo{DeviceID: "d", CPUCount: 4, MemoryTotalGB: 1.5,
		Tools: []MCPToolInfo{{ToolKey: "action::x", ToolName: "x", Namespace: "n", ToolType: ToolAction}}}, info)
}

func TestCheckUTF8NamesTheField(t *testing.T) {
	m := &ClientMessage{Type: ClientCommandResults, Status: StatusOK,
		ActionResults: []Result{{Status: ResultSuccess}, {Status: ResultSuccess, Result: map[string]any{"out": "ok\xffno"}}}}
	assert.EqualError(t, checkUTF8(m), `field "action_results[1].result.out": invalid UTF-8`)
	m.ActionResults[1].Result = map[string]any{"ok": []any{"fine", "bad\xff"}}
	assert.EqualError(t, checkUTF8(m), `field "action_results[1].result.ok[1]": invalid UTF-8`)
	m.ActionResults[1].Result = map[string]any{"k\xff": 1}
	assert.EqualError(t, checkUTF8(m), `field "action_results[1].result": invalid UTF-8`)
	m.ActionResults[1].Result = map[string]any{"ok": []any{"fine"}}
	m.Error = "\xfe"
	assert.EqualError(t, checkUTF8(m), `field "error": invalid UTF-8`)
	m.Error = ""
	assert.NoError(t, checkUTF8(m))
	assert.EqualError(t, checkUTF8(&SystemInfo{Labels: map[string]string{"a": "\xff"}}), `field "labels.a": invalid UTF-8`)
	cmd := &ServerMessage{Type: ServerCommand, Status: StatusContinue, ResponseID: "r", SessionID: "s",
		Actions: []Command{{CallID: "c", ToolName: "echo", ToolType: ToolAction, Parameters: map[string]any{"text": "hi"}}}}
	assert.Zero(t, testing.AllocsPerRun(10, func() { _ = checkUTF8(cmd) }), "a valid message is checked without allocating")
}

func TestATypeErrorNeverReadsAsAContradiction(t *testing.T) {
	var m ClientMessage
	err := JSON.Unmarshal([]byte(`{"type":"command_results","status":"ok","action_results":[{"status":"success","usage":{"fuel":-1}}]}`), &m)
	assert.ErrorContains(t, err, `in field "action_results": want a non-negative integer, got a negative integer`)
	err = JSON.Unmarshal([]byte(`{"type":"heartbeat","status":"ok","request_id":5}`), &m)
	assert.ErrorContains(t, err, `in field "request_id": want a string, got an integer`)
}

func TestAnEncodingLogsByItsName(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("registered", "wire", CBOR, "other", JSON)
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line))
	assert.Equal(t, "cbor", line["wire"])
	assert.Equal(t, "json", line["other"])
}

// heartbeatWith is a heartbeat frame with one more pair appended.
func heartbeatWith(pair ...byte) []byte {
	b := cborMap(cborText("type"), cborText("heartbeat"), cborText("status"), cborText("ok"))
	b[0]++ // one pair more
	return append(b, pair...)
}
