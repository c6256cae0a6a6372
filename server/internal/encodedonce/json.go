package encodedonce

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/edgeaip/edgeaip/protocol"
)

// JSON is params as a JSON object, its keys sorted as encoding/json sorts
// a map's: a wrapped value as its encoding was made, any other encoded
// now. Its keys are escaped as encoding/json escapes them; its values, as
// the JSON wire writes them, keep <, > and & as they are. Nil is the
// empty object, as the agent reads a command with no parameters.
func JSON(params map[string]any) ([]byte, error) { return appendJSON(nil, params) }

func appendJSON(dst []byte, params map[string]any) ([]byte, error) {
	dst = append(dst, '{')
	for i, k := range slices.Sorted(maps.Keys(params)) {
		if i > 0 {
			dst = append(dst, ',')
		}
		key, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		dst = append(append(dst, key...), ':')
		val, err := valueJSON(params[k])
		if err != nil {
			return nil, fmt.Errorf("parameter %q: %w", k, err)
		}
		dst = append(dst, val...)
	}
	return append(dst, '}'), nil
}

func valueJSON(v any) ([]byte, error) {
	if w, ok := v.(*Value); ok {
		return w.MarshalJSON()
	}
	return protocol.JSON.Marshal(v)
}

// CommandsJSON is actions as JSON, as encoding/json writes them, but for
// their parameters, which it writes as [JSON] does.
func CommandsJSON(actions []protocol.Command) ([]byte, error) {
	if actions == nil {
		return []byte("null"), nil
	}
	dst := []byte{'['}
	for i, a := range actions {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendCommand(dst, a); err != nil {
			return nil, fmt.Errorf("action %d: %w", i, err)
		}
	}
	return append(dst, ']'), nil
}

// appendCommand writes a's fields in protocol.Command's order, each
// omitted where its tag omits it.
func appendCommand(dst []byte, a protocol.Command) ([]byte, error) {
	dst = appendField(append(dst, '{'), "tool_name", a.ToolName)
	if a.Parameters != nil {
		var err error
		if dst, err = appendJSON(append(dst, `,"parameters":`...), a.Parameters); err != nil {
			return nil, err
		}
	}
	if a.ToolType != "" {
		dst = appendField(append(dst, ','), "tool_type", string(a.ToolType))
	}
	if a.CallID != "" {
		dst = appendField(append(dst, ','), "call_id", a.CallID)
	}
	return append(dst, '}'), nil
}

func appendField(dst []byte, name, value string) []byte {
	dst = append(append(append(dst, '"'), name...), `":`...)
	b, _ := json.Marshal(value) // a string always encodes
	return append(dst, b...)
}
