package protocol

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInstallToolParamsRoundTrip(t *testing.T) {
	wasm := bytes.Repeat([]byte("\x00asm module bytes "), 1000)
	params, err := InstallToolParams(wasm, "kiosk")
	require.NoError(t, err)
	assert.Less(t, len(params["module"].(string)), len(wasm)/4, "compressed")
	got, ns, err := InstalledModule(params)
	require.NoError(t, err)
	assert.Equal(t, wasm, got)
	assert.Equal(t, "kiosk", ns)
}

func TestInstalledModuleRefusesCorruptAndOversizedModules(t *testing.T) {
	params, err := InstallToolParams([]byte("module"), "")
	require.NoError(t, err)

	wrong := map[string]any{"module": params["module"], "sha256": "00"}
	_, _, err = InstalledModule(wrong)
	assert.ErrorContains(t, err, `parameter "sha256": the module's digest is`)

	_, _, err = InstalledModule(map[string]any{"module": "%%%", "sha256": params["sha256"]})
	assert.ErrorContains(t, err, `parameter "module": base64`)

	// A gzip bomb: small on the wire, too large once inflated.
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(make([]byte, MaxModuleBytes+10))
	zw.Close()
	_, _, err = InstalledModule(map[string]any{"module": base64.StdEncoding.EncodeToString(buf.Bytes()), "sha256": "x"})
	assert.ErrorContains(t, err, "more than")

	_, _, err = InstalledModule(map[string]any{"sha256": "x"})
	assert.ErrorContains(t, err, `parameter "module": missing`)
}
