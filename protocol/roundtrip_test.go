package protocol

import (
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Round-trip properties: for every type of the model and both encodings,
// decode(encode(x)) == x for random x. Set ROUNDTRIP_SEED to replay a run.

const roundTrips = 300

func TestRoundTripServerMessage(t *testing.T) {
	checkRoundTrip(t, randServerMessage, decodeMessage[ServerMessage])
}

func TestRoundTripClientMessage(t *testing.T) {
	checkRoundTrip(t, randClientMessage, decodeMessage[ClientMessage])
}

func TestRoundTripCommand(t *testing.T) { checkRoundTrip(t, randCommand, decodeValue[Command]) }

func TestRoundTripResult(t *testing.T) { checkRoundTrip(t, randResult, decodeValue[Result]) }

func TestRoundTripUsage(t *testing.T) { checkRoundTrip(t, randUsage, decodeValue[Usage]) }

func TestRoundTripMCPToolInfo(t *testing.T) {
	checkRoundTrip(t, randToolInfo, decodeValue[MCPToolInfo])
}

func TestRoundTripSystemInfo(t *testing.T) {
	checkRoundTrip(t, randSystemInfo, decodeValue[SystemInfo])
}

func decodeMessage[T any, P interface {
	*T
	Message
}](enc Encoding, b []byte) (*T, error) {
	var v T
	return &v, enc.Unmarshal(b, P(&v))
}

func decodeValue[T any](enc Encoding, b []byte) (*T, error) {
	var v T
	return &v, enc.UnmarshalValue(b, &v)
}

func checkRoundTrip[T any](t *testing.T, gen func(*rand.Rand) *T, decode func(Encoding, []byte) (*T, error)) {
	t.Helper()
	r := testRand(t)
	for i := range roundTrips {
		in := gen(r)
		for _, enc := range encodings {
			b, err := enc.Marshal(in)
			require.NoError(t, err, "case %d, %s", i, enc)
			out, err := decode(enc, b)
			require.NoError(t, err, "case %d, %s: %s", i, enc, b)
			require.Equal(t, in, out, "case %d, %s: %s", i, enc, b)
		}
	}
}

// testRand returns a random source seeded from ROUNDTRIP_SEED, or from the
// clock, and names the seed if the test fails.
func testRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ROUNDTRIP_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with ROUNDTRIP_SEED=%d", seed)
		}
	})
	return rand.New(rand.NewPCG(seed, seed))
}

// pick returns one of vs at random.
func pick[T any](r *rand.Rand, vs ...T) T { return vs[r.IntN(len(vs))] }

var strs = []string{"", "a", "hash_file", "Zürich café ✓", "<b>&amp;</b>", "line\nbreak\t\"quoted\"\\", "🦀\u2028\u0000", "2026-11-21T08:00:00.123456+00:00"}

func randString(r *rand.Rand) string {
	if r.IntN(4) == 0 {
		return strconv.FormatUint(r.Uint64(), 36)
	}
	return pick(r, strs...)
}

func randNonEmpty(r *rand.Rand) string {
	if s := randString(r); s != "" {
		return s
	}
	return "x"
}

// randValue is a value of the JSON data model, as both decoders produce
// it. Floats are never integral: JSON would bring those back as int64.
func randValue(r *rand.Rand, depth int) any {
	n := 6
	if depth > 0 {
		n = 8
	}
	switch r.IntN(n) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return pick(r, int64(0), int64(-1), math.MaxInt64, math.MinInt64, r.Int64()-r.Int64())
	case 3:
		f := (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(24)-12))
		if f == math.Trunc(f) {
			f += 0.5
		}
		return f
	case 4, 5:
		return randString(r)
	case 6:
		a := []any{}
		for range r.IntN(4) {
			a = append(a, randValue(r, depth-1))
		}
		return a
	default:
		return randMap(r, depth-1)
	}
}

func randMap(r *rand.Rand, depth int) map[string]any {
	m := map[string]any{}
	for range r.IntN(4) {
		m[randString(r)] = randValue(r, depth)
	}
	return m
}

// randOptMap is nil, empty or filled: the three differ on the wire.
func randOptMap(r *rand.Rand) map[string]any {
	if r.IntN(3) == 0 {
		return nil
	}
	return randMap(r, 2)
}

func randSlice[T any](r *rand.Rand, gen func(*rand.Rand) T) []T {
	switch r.IntN(3) {
	case 0:
		return nil
	case 1:
		return []T{}
	}
	s := make([]T, 1+r.IntN(4))
	for i := range s {
		s[i] = gen(r)
	}
	return s
}

func randCommand(r *rand.Rand) *Command {
	return &Command{ToolName: randNonEmpty(r), Parameters: randOptMap(r),
		ToolType: pick(r, "", ToolAction, ToolDataCollection), CallID: randString(r)}
}

func randResult(r *rand.Rand) *Result {
	res := &Result{Status: pick(r, ResultSuccess, ResultFailure, ResultSkipped, ResultNone),
		Error: randString(r), Result: randValue(r, 3), Namespace: randString(r), CallID: randString(r)}
	if r.IntN(2) == 0 {
		res.Usage = randUsage(r)
	}
	return res
}

func randUsage(r *rand.Rand) *Usage {
	return &Usage{Fuel: r.Uint64N(math.MaxInt64), WallMicros: r.Int64(), MemoryPages: r.Uint32(), StdoutBytes: r.Int64()}
}

func randServerMessage(r *rand.Rand) *ServerMessage {
	return &ServerMessage{
		Type:        pick(r, ServerTask, ServerHeartbeat, ServerTaskEnd, ServerCommand, ServerError, ServerDeviceInfoRequest, ServerDeviceInfoResponse),
		Status:      pick(r, StatusContinue, StatusCompleted, StatusFailed, StatusOK, StatusError),
		UserRequest: randString(r), AgentName: randString(r), ProcessName: randString(r), RootName: randString(r),
		Actions:  randSlice(r, func(r *rand.Rand) Command { return *randCommand(r) }),
		Messages: randSlice(r, randString),
		Error:    randString(r), SessionID: randString(r), TaskName: randString(r), Timestamp: randString(r),
		ResponseID: randString(r), Result: randValue(r, 3), Token: randString(r),
	}
}

func randClientMessage(r *rand.Rand) *ClientMessage {
	return &ClientMessage{
		Type: pick(r, ClientTask, ClientHeartbeat, ClientCommandResults, ClientError, ClientRegister,
			ClientTaskEnd, ClientDeviceInfoRequest, ClientDeviceInfoResponse),
		Status:     pick(r, StatusContinue, StatusCompleted, StatusFailed, StatusOK, StatusError),
		ClientType: pick(r, ClientDevice, ClientConstellation),
		SessionID:  randString(r), TaskName: randString(r), ClientID: randString(r), TargetID: randString(r),
		Request:       randString(r),
		ActionResults: randSlice(r, func(r *rand.Rand) Result { return *randResult(r) }),
		Timestamp:     randString(r), RequestID: randString(r), PrevResponseID: randString(r), Error: randString(r),
		Metadata: randOptMap(r),
	}
}

func randToolInfo(r *rand.Rand) *MCPToolInfo {
	tt := pick(r, ToolAction, ToolDataCollection)
	name := randNonEmpty(r)
	return &MCPToolInfo{ToolKey: ToolKey(tt, name), ToolName: name, Title: randString(r), Namespace: randString(r),
		ToolType: tt, Description: randString(r), InputSchema: randOptMap(r), OutputSchema: randOptMap(r),
		Meta: randOptMap(r), Annotations: randOptMap(r)}
}

func randSystemInfo(r *rand.Rand) *SystemInfo {
	var labels map[string]string
	if r.IntN(2) == 0 {
		labels = map[string]string{randString(r): randString(r)}
	}
	return &SystemInfo{
		DeviceID: randString(r), Platform: randString(r), OSVersion: randString(r), CPUCount: r.IntN(256),
		MemoryTotalGB: float64(r.IntN(1<<20)) / 100, Hostname: randString(r), IPAddress: randString(r),
		SupportedFeatures: randSlice(r, randString), PlatformType: randString(r), SchemaVersion: randString(r),
		CustomMetadata: randOptMap(r), Arch: randString(r), AgentVersion: randString(r), Labels: labels,
		Tools: randSlice(r, func(r *rand.Rand) MCPToolInfo { return *randToolInfo(r) }),
	}
}
