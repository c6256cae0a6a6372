package manifest

import (
	"os"
	"path/filepath"
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
		`{"name":"../x",` + base + `}`:                                                          `field "name"`,
		`{"name":"t","tool_type":"query","input_schema":{"type":"object"}}`:                     `field "tool_type": want action or data_collection`,
		`{"name":"t","tool_type":"action"}`:                                                     `field "input_schema": missing`,
		`{"name":"t","tool_type":"action","input_schema":{"type":"string"}}`:                    `"type" must be "object"`,
		`{"name":"t","tool_type":"action","input_schema":{"type":"object","$ref":"file:///x"}}`: `field "input_schema": schema:`,
		`{"name":"t",` + base + `,"capabilites":{}}`:                                            `unknown field "capabilites"`,
		`{"name":"t",` + base + `,"capabilities":{"dirs":[{"path":"data","mode":"ro"}]}}`:       `dirs[0]: path "data": want an absolute, clean path`,
		`{"name":"t",` + base + `,"capabilities":{"dirs":[{"path":"/a/../b","mode":"ro"}]}}`:    `want an absolute, clean path`,
		`{"name":"t",` + base + `,"capabilities":{"dirs":[{"path":"/a","mode":"rwx"}]}}`:        `mode "rwx": want ro or rw`,
		`{"name":"t",` + base + `,"capabilities":{"env":["A=B"]}}`:                              `env[0]: "A=B" is not an environment variable name`,
		`{"name":"t",` + base + `,"limits":{"timeout":"soon"}}`:                                 `duration "soon"`,
		`{"name":"t",` + base + `,"limits":{"memory":"32MB"}}`:                                  `size "32MB"`,
		`{"name":"t",` + base + `} {}`:                                                          `trailing data`,
		`{"name":"t",` + base + `,"init":"wizer"}`:                                              `field "init": want snapshot, snapshot-or-plain or plain, got "wizer"`,
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
	assert.ErrorContains(t, err, `field "name"`)
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
	assert.ErrorContains(t, err, "d.json: manifest of \"d\": field \"tool_type\"")
}
