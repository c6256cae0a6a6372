package tasks

import (
	"testing"

	"github.com/edgeaip/edgeaip/internal/encodecount"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/tasks/internal/inventory"
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
// needs, however many devices it is for and whichever wire they speak:
// JSON for their size and schema, and for the frame of a device that
// speaks UFO's JSON; CBOR for the frame of the others.
func TestAdmissionEncodesAStepsParametersOncePerFormat(t *testing.T) {
	tools := []protocol.MCPToolInfo{tool("", "echo", protocol.ToolAction)}
	invs := map[string]inventory.Inventory{
		"a": {DeviceID: "a", Online: true, Tools: tools},
		"b": {DeviceID: "b", Online: true, Tools: tools},
		"c": {DeviceID: "c", Online: true, Tools: tools},
		"u": {DeviceID: "u", Online: true, Tools: tools, UFOJSON: true},
	}
	a := &Admission{limits: Limits{MaxPlanBytes: 1 << 20, MaxParamBytes: 1 << 20}, frameCap: 1 << 20,
		inventory: func(id string) inventory.Inventory { return invs[id] }}
	for _, devices := range [][]string{{"a", "b", "c"}, {"a", "u", "b"}} {
		counted := encodecount.New()
		o := CommandOrder(testAdmin, "a", []protocol.Command{{ToolName: "echo", ToolType: protocol.ToolAction,
			Parameters: map[string]any{"v": counted}}})
		o.Devices = devices
		require.NoError(t, a.admit(o))
		assert.EqualValues(t, 1, counted.JSON(), "on %v", devices)
		assert.EqualValues(t, 1, counted.CBOR(), "on %v", devices)
	}
}
