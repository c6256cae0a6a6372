package mcptool

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func TestANameKeepsWhatClientsTakeAndADotBecomesAnUnderscore(t *testing.T) {
	names := Names([]Named{
		{Base: "kiosk-1__hash_file", Key: "a"},
		{Base: "lobby.kiosk.2__read_file", Key: "b"},
		{Base: "", Key: "c"},
		{Base: "ü__x", Key: "d"},
	})
	assert.Equal(t, []string{"kiosk-1__hash_file", "lobby_kiosk_2__read_file", "_", "___x"}, names)
}

func TestAnOverlongNameIsCutAndSuffixedWithAShortHashOfItsKey(t *testing.T) {
	base := strings.Repeat("d", 40) + "__" + strings.Repeat("t", 40)
	names := Names([]Named{{Base: base, Key: "dev\x00ns\x00action\x00tool"}})
	require.Len(t, names[0], MaxNameLen)
	assert.Regexp(t, validName, names[0])
	assert.Equal(t, base[:55]+"_"+shortHash("dev\x00ns\x00action\x00tool"), names[0])
	assert.Equal(t, names, Names([]Named{{Base: base, Key: "dev\x00ns\x00action\x00tool"}}), "the same tool gets the same name every time")
}

// Two tools whose names would be the same (one device's tool in two
// namespaces, or device ids that differ in a "." and a "_") each get a
// hashed name, and neither gets the bare one.
func TestToolsWhoseNamesCollideAreEachSuffixedWithTheHashOfTheirKey(t *testing.T) {
	names := Names([]Named{
		{Base: "kiosk.1__echo", Key: "kiosk.1\x00stock\x00echo"},
		{Base: "kiosk_1__echo", Key: "kiosk_1\x00stock\x00echo"},
		{Base: "kiosk_1__list_dir", Key: "kiosk_1\x00stock\x00list_dir"},
	})
	assert.Equal(t, "kiosk_1__echo_"+shortHash("kiosk.1\x00stock\x00echo"), names[0])
	assert.Equal(t, "kiosk_1__echo_"+shortHash("kiosk_1\x00stock\x00echo"), names[1])
	assert.Equal(t, "kiosk_1__list_dir", names[2])
	assert.NotEqual(t, names[0], names[1])
	for _, n := range names {
		assert.Regexp(t, validName, n)
	}
}

func TestAToolIsDescribedWithItsSchemaAndTheHintsOfItsType(t *testing.T) {
	read := Tool("kiosk-1__read_file", protocol.MCPToolInfo{ToolName: "read_file", ToolType: protocol.ToolDataCollection,
		Description: "Read a file.", InputSchema: map[string]any{"type": "object", "required": []any{"path"}}})
	assert.Equal(t, "Read a file.", read.Description)
	assert.JSONEq(t, `{"type":"object","required":["path"]}`, string(read.RawInputSchema))
	assert.True(t, *read.Annotations.ReadOnlyHint)
	assert.False(t, *read.Annotations.DestructiveHint)

	act := Tool("reboot", protocol.MCPToolInfo{ToolName: "reboot", ToolType: protocol.ToolAction})
	assert.JSONEq(t, `{"type":"object"}`, string(act.RawInputSchema), "a tool without a schema takes any object")
	assert.False(t, *act.Annotations.ReadOnlyHint)
	assert.True(t, *act.Annotations.DestructiveHint)
}

func TestAResultCarriesTheAIPResultAsStructuredContentAndASummaryAsText(t *testing.T) {
	res := protocol.Result{Status: protocol.ResultSuccess, Result: map[string]any{"sha256": "ab"}, CallID: "c-1",
		Usage: &protocol.Usage{Fuel: 1200, WallMicros: 4200}}
	out := Result("hash_file on kiosk-1", res, Cut{})
	assert.False(t, out.IsError)
	assert.Equal(t, res, out.StructuredContent)
	text := out.Content[0].(mcp.TextContent).Text
	assert.Equal(t, "hash_file on kiosk-1: success (fuel 1200, wall time 4.2ms)\n{\"sha256\":\"ab\"}", text)

	failed := Result("hash_file on kiosk-1", protocol.Result{Status: protocol.ResultFailure, Error: "out of fuel after 10 units"}, Cut{})
	assert.True(t, failed.IsError)
	assert.Equal(t, "hash_file on kiosk-1: failure: out of fuel after 10 units", failed.Content[0].(mcp.TextContent).Text)
}

func TestAResultOverTheCapIsCutSayingSoAndWhereItIsWhole(t *testing.T) {
	res := protocol.Result{Status: protocol.ResultSuccess, Result: strings.Repeat("x", 100)}
	out := Result("read_file on kiosk-1", res, Cut{MaxBytes: 10, WholeAt: "http://s/api/tasks/t-1"})
	assert.False(t, out.IsError)
	b, err := json.Marshal(out.StructuredContent)
	require.NoError(t, err)
	assert.JSONEq(t, `{"status":"success","result":{"cut":true,"bytes":102,"max_bytes":10,"whole_at":"http://s/api/tasks/t-1"}}`, string(b))
	text := out.Content[0].(mcp.TextContent).Text
	assert.Contains(t, text, "The result, 102 bytes of JSON, is more than the 10 this answer carries")
	assert.Contains(t, text, "The whole result is at http://s/api/tasks/t-1.")
	assert.True(t, strings.HasSuffix(text, "\n\"xxxxxxxxx"), text)
}
