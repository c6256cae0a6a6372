package mcptool

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/wasmtools/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// validates reports what schema s says of the structuredContent of res.
func validates(t *testing.T, s json.RawMessage, res protocol.Result, c Cut) error {
	t.Helper()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(s, &doc))
	v, err := schema.Compile(doc)
	require.NoError(t, err)
	b, err := json.Marshal(Result("x", res, c).StructuredContent)
	require.NoError(t, err)
	return v.Validate(b)
}

// A tool's outputSchema is the AIP Result, whose result is the tool's own
// output: a success matches it, one that breaks it does not, and a
// failure (no result) and a result cut for its size match too.
func TestAToolsOutputSchemaIsTheResultWithItsOwnOutput(t *testing.T) {
	own := map[string]any{"type": "object", "properties": map[string]any{"sha256": map[string]any{"type": "string"}}, "required": []any{"sha256"}}
	s := Tool("hash_file", protocol.MCPToolInfo{ToolName: "hash_file", OutputSchema: own}).RawOutputSchema
	usage := &protocol.Usage{Fuel: 10, WallMicros: 5}
	assert.NoError(t, validates(t, s, protocol.Result{Status: protocol.ResultSuccess, Result: map[string]any{"sha256": "ab"}, CallID: "c", Usage: usage}, Cut{}))
	assert.Error(t, validates(t, s, protocol.Result{Status: protocol.ResultSuccess, Result: map[string]any{"md5": "ab"}}, Cut{}))
	assert.NoError(t, validates(t, s, protocol.Result{Status: protocol.ResultFailure, Error: "out of fuel"}, Cut{}))
	big := protocol.Result{Status: protocol.ResultSuccess, Result: map[string]any{"sha256": strings.Repeat("a", 100)}}
	assert.NoError(t, validates(t, s, big, Cut{MaxBytes: 10, WholeAt: "http://s/api/tasks/t"}))

	open := Tool("x", protocol.MCPToolInfo{ToolName: "x"}).RawOutputSchema
	assert.NoError(t, validates(t, open, protocol.Result{Status: protocol.ResultSuccess, Result: []any{1, "two"}}, Cut{}), "no schema: any result")
}

// A tool's schema with a "$ref" is not embedded: its references point
// into its own root, which is not the root of the Result's schema.
func TestAToolsSchemaWithReferencesLeavesTheResultOpen(t *testing.T) {
	own := map[string]any{"$defs": map[string]any{"n": map[string]any{"type": "integer"}}, "type": "object",
		"properties": map[string]any{"n": map[string]any{"$ref": "#/$defs/n"}}}
	s := ResultSchema(own)
	assert.NotContains(t, string(s), "$ref")
	assert.NoError(t, validates(t, s, protocol.Result{Status: protocol.ResultSuccess, Result: map[string]any{"n": "not a number"}}, Cut{}))
}

// Every tool has a title: its own, else its name.
func TestEveryToolHasATitle(t *testing.T) {
	assert.Equal(t, "Hash a file", Tool("kiosk-1__hash_file", protocol.MCPToolInfo{ToolName: "hash_file", Title: "Hash a file"}).Title)
	assert.Equal(t, "hash_file", Tool("kiosk-1__hash_file", protocol.MCPToolInfo{ToolName: "hash_file"}).Title)
}
