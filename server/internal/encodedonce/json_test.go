package encodedonce

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The JSON written from wrapped values is what encoding/json writes
// from the values, but for <, > and &, which the values keep as the JSON
// wire does: a store's rows read back as they did.
func TestCommandsAsJSONAreWhatEncodingJSONWrites(t *testing.T) {
	require.Equal(t, 4, reflect.TypeFor[protocol.Command]().NumField(),
		"appendCommand writes protocol.Command's fields: give it the new one")
	plain := params()
	delete(plain, "html")
	actions := func(p map[string]any) []protocol.Command {
		return []protocol.Command{
			{ToolName: "echo", Parameters: p, ToolType: protocol.ToolAction, CallID: "c1"},
			{ToolName: "list_dir", Parameters: map[string]any{}},
			{ToolName: "ping <&>"},
		}
	}
	want, err := json.Marshal(actions(plain))
	require.NoError(t, err)
	wrapped := params()
	delete(wrapped, "html")
	Wrap(wrapped)
	got, err := CommandsJSON(actions(wrapped))
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))

	withHTML := params()
	want, err = json.Marshal(actions(withHTML))
	require.NoError(t, err)
	Wrap(withHTML)
	got, err = CommandsJSON(actions(withHTML))
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))
	assert.Contains(t, string(got), `"<a href='x'>&</a>"`)

	got, err = CommandsJSON(nil)
	require.NoError(t, err)
	assert.Equal(t, "null", string(got))
}

func TestParametersAsJSONAreAnObjectEvenWhenThereAreNone(t *testing.T) {
	for _, p := range []map[string]any{nil, {}} {
		got, err := JSON(p)
		require.NoError(t, err)
		assert.Equal(t, "{}", string(got))
	}
	_, err := JSON(map[string]any{"f": func() {}})
	assert.ErrorContains(t, err, `parameter "f"`)
}
