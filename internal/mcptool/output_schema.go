package mcptool

import (
	"encoding/json"

	"github.com/edgeaip/edgeaip/protocol"
)

// ResultSchema is the outputSchema of a tool that answers with an AIP
// Result (Result's structuredContent): its status, error, call_id,
// namespace and usage, and its result, which is the tool's own output
// (output, the output_schema of its manifest; nil: anything) or, for a
// result too large to return whole, what Result puts in its place. A
// failure carries no result, so result is never required.
//
// A tool's schema that uses "$ref" is not embedded: its references are
// relative to its own root, which is no longer the root here, and a
// client would fail to resolve them; its result is then left open.
func ResultSchema(output map[string]any) json.RawMessage {
	result := map[string]any{}
	if len(output) > 0 && !hasRef(output) {
		result = map[string]any{"anyOf": []any{output, cutSchema}}
	}
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"status": map[string]any{"type": "string", "enum": []protocol.ResultStatus{
				protocol.ResultSuccess, protocol.ResultFailure, protocol.ResultSkipped, protocol.ResultNone}},
			"error":     map[string]any{"type": "string"},
			"result":    result,
			"namespace": map[string]any{"type": "string"},
			"call_id":   map[string]any{"type": "string"},
			"usage":     usageSchema,
		},
		"required": []string{"status"},
	}
	b, err := json.Marshal(schema)
	if err != nil {
		// A schema decoded from CBOR may hold what JSON cannot (a NaN):
		// its result is left open.
		return ResultSchema(nil)
	}
	return b
}

// cutSchema is what Result puts in place of a result too large to carry.
var cutSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"cut":       map[string]any{"const": true},
		"bytes":     map[string]any{"type": "integer"},
		"max_bytes": map[string]any{"type": "integer"},
		"whole_at":  map[string]any{"type": "string"},
	},
	"required": []string{"cut", "bytes", "max_bytes"},
}

// usageSchema is protocol.Usage's: what the sandbox measured.
var usageSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"fuel":         map[string]any{"type": "integer", "minimum": 0},
		"wall_us":      map[string]any{"type": "integer"},
		"memory_pages": map[string]any{"type": "integer", "minimum": 0},
		"stdout_bytes": map[string]any{"type": "integer"},
	},
}

// hasRef reports whether schema s has a "$ref" anywhere.
func hasRef(s any) bool {
	switch v := s.(type) {
	case map[string]any:
		if _, ok := v["$ref"]; ok {
			return true
		}
		for _, e := range v {
			if hasRef(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasRef(e) {
				return true
			}
		}
	}
	return false
}
