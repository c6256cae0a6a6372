package section

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func echoWasm(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "tools", "echo.wasm"))
	require.NoError(t, err)
	return b
}

func TestCustomSectionRoundTripKeepsEveryOtherByte(t *testing.T) {
	orig := echoWasm(t)
	_, found, err := Custom(orig, "aip.tool")
	require.NoError(t, err)
	assert.False(t, found)

	with, err := WithCustom(orig, "aip.tool", []byte(`{"name":"echo"}`))
	require.NoError(t, err)
	got, found, err := Custom(with, "aip.tool")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, `{"name":"echo"}`, string(got))

	replaced, err := WithCustom(with, "aip.tool", []byte("v2"))
	require.NoError(t, err)
	got, _, err = Custom(replaced, "aip.tool")
	require.NoError(t, err)
	assert.Equal(t, "v2", string(got), "a second WithCustom replaces the section")

	back, err := WithoutCustom(replaced, "aip.tool")
	require.NoError(t, err)
	assert.Equal(t, orig, back)
}

func TestDuplicateCustomSectionsAreRefused(t *testing.T) {
	one, err := WithCustom(echoWasm(t), "aip.sig", []byte("a"))
	require.NoError(t, err)
	// Append a second section of the same name by hand.
	two := append(append([]byte{}, one...), IDCustom, 9, 7, 'a', 'i', 'p', '.', 's', 'i', 'g', 'b')
	_, err = Parse(two)
	require.NoError(t, err)
	_, _, err = Custom(two, "aip.sig")
	assert.EqualError(t, err, `custom section "aip.sig" appears more than once`)
}

func TestParseRefusesBadModules(t *testing.T) {
	echo := echoWasm(t)
	for name, b := range map[string][]byte{
		"empty":          nil,
		"text":           []byte("(module)"),
		"version 2":      {0, 'a', 's', 'm', 2, 0, 0, 0},
		"truncated":      echo[:len(echo)-3],
		"size past end":  append(append([]byte{}, echo[:8]...), 1, 0xff, 0x01),
		"bad name utf-8": append(append([]byte{}, echo[:8]...), 0, 3, 2, 0xff, 0xfe),
	} {
		_, err := Parse(b)
		assert.Error(t, err, name)
	}
}

func TestImportsAndExports(t *testing.T) {
	imps, err := Imports(echoWasm(t))
	require.NoError(t, err)
	assert.Equal(t, []Import{
		{Module: "wasi_snapshot_preview1", Name: "fd_read", Kind: KindFunc},
		{Module: "wasi_snapshot_preview1", Name: "fd_write", Kind: KindFunc},
	}, imps)
	exps, err := Exports(echoWasm(t))
	require.NoError(t, err)
	assert.Equal(t, []Export{{Name: "memory", Kind: KindMemory}, {Name: "_start", Kind: KindFunc}}, exps)
}

func TestMinMemoryPages(t *testing.T) {
	pages, err := MinMemoryPages(echoWasm(t))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), pages)
	// (module (memory 3 10)) and (module).
	pages, err = MinMemoryPages([]byte("\x00asm\x01\x00\x00\x00\x05\x04\x01\x01\x03\x0a"))
	require.NoError(t, err)
	assert.Equal(t, uint64(3), pages)
	pages, err = MinMemoryPages([]byte("\x00asm\x01\x00\x00\x00"))
	require.NoError(t, err)
	assert.Zero(t, pages)
	_, err = MinMemoryPages([]byte("\x00asm\x01\x00\x00\x00\x05\x02\x01\x01"))
	assert.ErrorContains(t, err, "memory section: ")
}
