package protocol

import (
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden NAME.cbor.hex and NAME.json from NAME.ufo.json")

// goldenDir holds, for every message type, a frame as UFO's pydantic
// models emit it (NAME.ufo.json, written by ufo_wire.py), and the CBOR
// (NAME.cbor.hex) and JSON (NAME.json) we emit for the same message.
const goldenDir = "../testdata/protocol"

type golden struct {
	name             string
	ufoJSON, ourJSON []byte
	cbor             []byte
}

func loadGolden(t testing.TB) []golden {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(goldenDir, "*.ufo.json"))
	require.NoError(t, err)
	require.Len(t, paths, 15, "one vector per client and server message type")
	var out []golden
	for _, p := range paths {
		g := golden{name: strings.TrimSuffix(filepath.Base(p), ".ufo.json")}
		g.ufoJSON = readFile(t, p)
		if !*update {
			g.ourJSON = readFile(t, filepath.Join(goldenDir, g.name+".json"))
			b, err := hex.DecodeString(strings.TrimSpace(string(readFile(t, filepath.Join(goldenDir, g.name+".cbor.hex")))))
			require.NoError(t, err, g.name)
			g.cbor = b
		}
		out = append(out, g)
	}
	return out
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// newMessage returns an empty message of the kind the vector's name says.
func (g golden) newMessage() Message {
	if strings.HasPrefix(g.name, "server_") {
		return &ServerMessage{}
	}
	return &ClientMessage{}
}

func TestGoldenVectors(t *testing.T) {
	for _, g := range loadGolden(t) {
		t.Run(g.name, func(t *testing.T) {
			fromUFO := g.newMessage()
			require.NoError(t, JSON.Unmarshal(g.ufoJSON, fromUFO), "UFO's frame decodes")
			cborOut, err := CBOR.Marshal(fromUFO)
			require.NoError(t, err)
			jsonOut, err := JSON.Marshal(fromUFO)
			require.NoError(t, err)
			if *update {
				writeGolden(t, g.name+".cbor.hex", []byte(hex.EncodeToString(cborOut)+"\n"))
				writeGolden(t, g.name+".json", jsonOut)
				return
			}

			fromCBOR := g.newMessage()
			require.NoError(t, CBOR.Unmarshal(g.cbor, fromCBOR), "our CBOR decodes")
			assert.Equal(t, fromUFO, fromCBOR, "UFO's JSON and our CBOR carry the same message")
			assert.Equal(t, g.cbor, cborOut, "re-encoding gives the golden CBOR:\n got %s\nwant %s", diag(cborOut), diag(g.cbor))

			fromOurJSON := g.newMessage()
			require.NoError(t, JSON.Unmarshal(g.ourJSON, fromOurJSON))
			assert.Equal(t, fromUFO, fromOurJSON, "our JSON carries the same message")
			assert.Equal(t, string(g.ourJSON), string(jsonOut), "re-encoding gives the golden JSON")
		})
	}
}

func diag(b []byte) string {
	s, err := cbor.Diagnose(b)
	if err != nil {
		return err.Error()
	}
	return s
}

func writeGolden(t *testing.T, name string, b []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(goldenDir, name), b, 0o644))
}

// TestUFOFramesKeepTheirValues pins down the decoded values where pydantic
// and Go could disagree: falsy results, numbers, null and absent fields.
func TestUFOFramesKeepTheirValues(t *testing.T) {
	var results ClientMessage
	require.NoError(t, JSON.Unmarshal(readFile(t, filepath.Join(goldenDir, "client_command_results.ufo.json")), &results))
	got := make([]any, len(results.ActionResults))
	for i, r := range results.ActionResults {
		got[i] = r.Result
	}
	assert.Equal(t, []any{
		map[string]any{"sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "size": int64(4096)},
		false, int64(0), "", []any{}, nil, nil,
	}, got)
	assert.Equal(t, ClientDevice, results.ClientType)
	assert.Nil(t, results.Metadata, "metadata: null")

	var cmd ServerMessage
	require.NoError(t, JSON.Unmarshal(readFile(t, filepath.Join(goldenDir, "server_command.ufo.json")), &cmd))
	require.Len(t, cmd.Actions, 3)
	p := cmd.Actions[1].Parameters
	assert.Equal(t, int64(20000), p["timeout_ms"])
	assert.Equal(t, int64(-3), p["offset"])
	assert.Equal(t, 0.75, p["ratio"])
	assert.Equal(t, "Zürich café ✓", p["label"])
	assert.Contains(t, p, "extra", "a null inside parameters is data, kept as nil")
	assert.Nil(t, p["extra"])
	assert.Nil(t, cmd.Actions[2].Parameters, "parameters: null")
	assert.Nil(t, cmd.Messages, "messages: null")
	assert.Nil(t, cmd.Result, "result: null")

	var reg ClientMessage
	require.NoError(t, JSON.Unmarshal(readFile(t, filepath.Join(goldenDir, "client_register.ufo.json")), &reg))
	info := reg.Metadata[MetadataSystemInfo].(map[string]any)
	assert.Equal(t, int64(4), info["cpu_count"])
	assert.Equal(t, 7.63, info["memory_total_gb"])
	assert.Equal(t, map[string]any{}, info["custom_metadata"])
}

// TestPydanticReadsOurJSON has pydantic itself read every golden frame we
// emit and compare it with UFO's.
func TestPydanticReadsOurJSON(t *testing.T) {
	out, err := testenv.UFOWire(t, "check").CombinedOutput()
	require.NoError(t, err, "%s", out)
}
