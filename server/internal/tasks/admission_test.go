package tasks

import (
	"testing"

	"github.com/edgeaip/edgeaip/internal/encodecount"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The compiled schemas kept are bounded, whatever devices register.
func TestTheSchemaCacheIsBounded(t *testing.T) {
	var sc schemaCache
	for i := range maxSchemas + 10 {
		v := sc.validator(map[string]any{"type": "object", "maxProperties": i})
		require.NotNil(t, v)
	}
	assert.Len(t, sc.byJSON, maxSchemas)
	assert.Len(t, sc.byDoc, maxSchemas)
	assert.Nil(t, sc.validator(map[string]any{"type": "no such type"}), "a schema that does not compile checks nothing, as on the agent")
}

// A schema is compiled once, whether the same map or an equal one
// brings it again.
func TestTheSchemaCacheFindsASchemaByItsMapOrItsJSON(t *testing.T) {
	var sc schemaCache
	doc := map[string]any{"type": "object", "required": []any{"path"}}
	first := sc.validator(doc)
	require.NotNil(t, first)
	assert.Same(t, first, sc.validator(doc))
	assert.Same(t, first, sc.validator(map[string]any{"type": "object", "required": []any{"path"}}))
	assert.Len(t, sc.byJSON, 1)
	assert.Len(t, sc.byDoc, 2)
	assert.Error(t, first.Validate([]byte(`{}`)), "the schema it found checks what it says")
}

// Admission encodes a command's parameters once in each format a step
// needs, however many devices it is for: JSON for their size and schema,
// and each wire's encoding for the frame it makes, which the devices that
// speak it share.
func TestAdmissionEncodesAStepsParametersOncePerFormat(t *testing.T) {
	counted := encodecount.New()
	tools := []protocol.MCPToolInfo{tool("", "echo", protocol.ToolAction)}
	invs := map[string]Inventory{
		"a": {deviceID: "a", online: true, tools: tools},
		"b": {deviceID: "b", online: true, tools: tools},
		"c": {deviceID: "c", online: true, tools: tools},
		"u": {deviceID: "u", online: true, tools: tools, ufoJSON: true},
	}
	a := &Admission{limits: Limits{MaxPlanBytes: 1 << 20, MaxParamBytes: 1 << 20}, frameCap: 1 << 20,
		inventory: func(id string) Inventory { return invs[id] }}
	o := CommandOrder(testAdmin, "a", []protocol.Command{{ToolName: "echo", ToolType: protocol.ToolAction,
		Parameters: map[string]any{"v": counted}}})

	o.Devices = []string{"a", "b", "c"}
	require.NoError(t, a.admit(o))
	assert.EqualValues(t, 1, counted.JSON(), "its size, as JSON")
	assert.EqualValues(t, 1, counted.CBOR(), "the frame the three devices share")

	counted.Reset()
	o.Devices = []string{"a", "u", "b"}
	require.NoError(t, a.admit(o))
	assert.EqualValues(t, 2, counted.JSON(), "its size, and the frame of the device that speaks UFO's JSON")
	assert.EqualValues(t, 1, counted.CBOR())
}
