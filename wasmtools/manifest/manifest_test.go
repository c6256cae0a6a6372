package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const readFile = `{
  "name": "read_file",
  "version": "1.2.0",
  "description": "Read a file.",
  "tool_type": "data_collection",
  "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
  "capabilities": {"dirs": [{"path": "*", "mode": "ro"}, {"path": "/etc/kiosk", "mode": "rw"}], "env": ["TZ"]},
  "limits": {"fuel": 1000000, "timeout": "5s", "memory": "32MiB"},
  "init": "snapshot-or-plain"
}`

func TestParseReadsEveryField(t *testing.T) {
	m, err := Parse([]byte(readFile))
	require.NoError(t, err)
	assert.Equal(t, "read_file", m.Name)
	assert.Equal(t, "1.2.0", m.Version)
	assert.Equal(t, ToolTypeDataCollection, m.ToolType)
	assert.Equal(t, []Dir{{Path: AnyDir, Mode: ReadOnly}, {Path: "/etc/kiosk", Mode: ReadWrite}}, m.Capabilities.Dirs)
	assert.Equal(t, []string{"TZ"}, m.Capabilities.Env)
	assert.Equal(t, Limits{Fuel: 1000000, Timeout: Duration(5 * time.Second), Memory: 32 << 20}, m.Limits)
	assert.Equal(t, InitSnapshotOrPlain, m.Init)
}

func TestParseRefusesBadManifests(t *testing.T) {
	base := `"tool_type":"action","input_schema":{"type":"object"}`
	for doc, want := range map[string]string{
		`{"name":"../x",` + base + `}`:                                                          `name: "`,
		`{"name":"t","tool_type":"query","input_schema":{"type":"object"}}`:                     `tool_type: want action or data_collection`,
		`{"name":"t","tool_type":"action"}`:                                                     `input_schema: missing`,
		`{"name":"t","tool_type":"action","input_schema":{"type":"string"}}`:                    `"type" must be "object"`,
		`{"name":"t","tool_type":"action","input_schema":{"type":"object","$ref":"file:///x"}}`: `input_schema: schema:`,
		`{"name":"t",` + base + `,"capabilites":{}}`:                                            `capabilites: unknown field; did you mean capabilities?`,
		`{"name":"t",` + base + `,"capabilities":{"dirs":[{"path":"data","mode":"ro"}]}}`:       `capabilities.dirs[0].path: "data": want an absolute, clean path`,
		`{"name":"t",` + base + `,"capabilities":{"dirs":[{"path":"/a/../b","mode":"ro"}]}}`:    `want an absolute, clean path`,
		`{"name":"t",` + base + `,"capabilities":{"dirs":[{"path":"/a","mode":"rwx"}]}}`:        `capabilities.dirs[0].mode: "rwx": want ro or rw`,
		`{"name":"t",` + base + `,"capabilities":{"env":["A=B"]}}`:                              `capabilities.env[0]: "A=B" is not an environment variable name`,
		`{"name":"t",` + base + `,"limits":{"timeout":"soon"}}`:                                 `duration "soon"`,
		`{"name":"t",` + base + `,"limits":{"memory":"32MB"}}`:                                  `size "32MB"`,
		`{"name":"t",` + base + `} {}`:                                                          `trailing data`,
		`{"name":"t",` + base + `,"init":"wizer"}`:                                              `init: want snapshot, snapshot-or-plain or plain, got "wizer"`,
	} {
		_, err := Parse([]byte(doc))
		assert.ErrorContains(t, err, want, doc)
	}
}

func TestByteSizeRoundTrips(t *testing.T) {
	for in, want := range map[string]ByteSize{"100": 100, `"100B"`: 100, `"64KiB"`: 64 << 10, `"1GiB"`: 1 << 30} {
		var s ByteSize
		require.NoError(t, s.UnmarshalJSON([]byte(in)), in)
		assert.Equal(t, want, s, in)
	}
	b, err := ByteSize(48 << 20).MarshalJSON()
	require.NoError(t, err)
	assert.Equal(t, `"48MiB"`, string(b))
}

func echo(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "tools", "echo.wasm"))
	require.NoError(t, err)
	return b
}

func TestEmbedThenFromWasm(t *testing.T) {
	m, err := Parse([]byte(readFile))
	require.NoError(t, err)
	packed, err := Embed(echo(t), m)
	require.NoError(t, err)
	mod, err := FromWasm(packed)
	require.NoError(t, err)
	assert.Equal(t, Embedded, mod.Source)
	assert.Equal(t, m, mod.Manifest)

	_, err = FromWasm(echo(t))
	assert.ErrorIs(t, err, ErrNone)
	_, err = Embed(echo(t), Manifest{Name: "bad name"})
	assert.ErrorContains(t, err, `name: "`)
}

func TestLoadPrefersTheEmbeddedManifestOverTheSidecar(t *testing.T) {
	dir := t.TempDir()
	m, err := Parse([]byte(readFile))
	require.NoError(t, err)
	packed, err := Embed(echo(t), m)
	require.NoError(t, err)
	sidecar := `{"name":"echo","tool_type":"action","input_schema":{"type":"object"}}`

	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.wasm"), packed, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.json"), []byte(sidecar), 0o644))
	mod, err := Load(filepath.Join(dir, "a.wasm"))
	require.NoError(t, err)
	assert.Equal(t, Embedded, mod.Source)
	assert.Equal(t, "read_file", mod.Manifest.Name)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.wasm"), echo(t), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.json"), []byte(sidecar), 0o644))
	mod, err = Load(filepath.Join(dir, "b.wasm"))
	require.NoError(t, err)
	assert.Equal(t, Sidecar, mod.Source)
	assert.Equal(t, "echo", mod.Manifest.Name)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "c.wasm"), echo(t), 0o644))
	_, err = Load(filepath.Join(dir, "c.wasm"))
	assert.ErrorIs(t, err, ErrNone)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "d.wasm"), echo(t), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "d.json"), []byte(`{"name":"d"}`), 0o644))
	_, err = Load(filepath.Join(dir, "d.wasm"))
	assert.ErrorContains(t, err, "d.json: manifest of \"d\": tool_type: missing: want action or data_collection; input_schema: missing")
}

// Item 3 of issue 24: every problem at once, each with its line, in the
// order of the fields.
func TestParseReportsEveryProblemWithItsLine(t *testing.T) {
	doc := `{
  "name": "../x",
  "tool_type": "action",
  "input_schema": {"type": "object"},
  "capabilities": {
    "dirs": [
      {"path": "/data", "mode": "ro"},
      {"path": "data", "mode": "rwx"}
    ],
    "evn": ["TZ"]
  },
  "limits": {"timeout": "soon", "fuel": "lots"}
}
`
	_, err := Parse([]byte(doc))
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, []Problem{
		{Path: "name", Line: 2, Problem: `"../x": want 1-64 of [A-Za-z0-9_-], not starting with '-'`},
		{Path: "capabilities.dirs[1].path", Line: 8, Problem: `"data": want an absolute, clean path or "*"`},
		{Path: "capabilities.dirs[1].mode", Line: 8, Problem: `"rwx": want ro or rw`},
		{Path: "capabilities.evn", Line: 10, Problem: "unknown field; did you mean env?"},
		{Path: "limits.fuel", Line: 12, Problem: "want a whole number, got a string"},
		{Path: "limits.timeout", Line: 12, Problem: `duration "soon": want a non-negative duration such as "5s"`},
	}, e.Problems)
	assert.True(t, strings.HasPrefix(err.Error(), `manifest: line 2: name: "../x": want 1-64 of [A-Za-z0-9_-], not starting with '-'; line 8: capabilities.dirs[1].path: `), err.Error())

	_, err = Parse([]byte("{\n  \"name\": \"t\",\n  \"tool_type\": \"action\"\n  \"input_schema\": {}\n}"))
	require.ErrorAs(t, err, &e)
	assert.Equal(t, []Problem{{Line: 4, Column: 3, Problem: "invalid character '\"' after object key:value pair"}}, e.Problems, "a syntax error, where it is")
}
