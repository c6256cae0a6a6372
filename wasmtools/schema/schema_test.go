package schema

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func compile(t *testing.T, doc string) *Validator {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(doc), &m))
	v, err := Compile(m)
	require.NoError(t, err)
	return v
}

const fileSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string"},
    "max_bytes": {"type": "integer", "minimum": 1},
    "options": {"type": "object", "properties": {"depth": {"type": "integer"}}}
  },
  "required": ["path"],
  "additionalProperties": false
}`

func TestValidParametersPass(t *testing.T) {
	v := compile(t, fileSchema)
	assert.NoError(t, v.Validate([]byte(`{"path":"/data/a","max_bytes":10,"options":{"depth":2}}`)))
}

func TestEachProblemNamesItsField(t *testing.T) {
	v := compile(t, fileSchema)
	for params, want := range map[string]string{
		`{}`:                                    `parameter "path": missing (required)`,
		`{"path":3}`:                            `parameter "path": got number, want string`,
		`{"path":"/a","extra":true}`:            `parameter "extra": not allowed (additionalProperties is false)`,
		`{"path":"/a","max_bytes":0}`:           `parameter "max_bytes": minimum: got 0, want 1`,
		`{"path":"/a","options":{"depth":"x"}}`: `parameter "options.depth": got string, want integer`,
		`[1]`:                                   `parameters: got array, want object`,
		`{"path":`:                              `parameters: not valid JSON`,
	} {
		err := v.Validate([]byte(params))
		var se *Error
		require.ErrorAs(t, err, &se, params)
		assert.Contains(t, err.Error(), want, params)
	}
}

func TestSeveralProblemsAreAllReported(t *testing.T) {
	err := compile(t, fileSchema).Validate([]byte(`{"max_bytes":"big","x":1}`))
	var se *Error
	require.ErrorAs(t, err, &se)
	var fields []string
	for _, p := range se.Problems {
		fields = append(fields, p.Field)
	}
	assert.Equal(t, []string{"max_bytes", "path", "x"}, fields)
}

func TestSchemasCannotLoadAnythingFromOutside(t *testing.T) {
	for _, ref := range []string{"file:///etc/passwd", "http://example.com/s.json", "other.json"} {
		_, err := Compile(map[string]any{"$ref": ref})
		assert.Error(t, err, ref)
	}
}

func TestInvalidSchemaIsACompileError(t *testing.T) {
	_, err := Compile(map[string]any{"type": "no-such-type"})
	assert.ErrorContains(t, err, "schema:")
	assert.NotContains(t, err.Error(), resourceURL)
}
