package section

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzSection feeds arbitrary bytes to every function of the package:
// none may panic, and a module that parses keeps every other byte through
// adding and removing a custom section.
func FuzzSection(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "tools", "*.wasm"))
	require.NoError(f, err)
	for _, file := range files {
		wasm, err := os.ReadFile(file)
		require.NoError(f, err)
		f.Add(wasm)
	}
	f.Fuzz(func(t *testing.T, wasm []byte) {
		_ = CheckBounds(wasm)
		_, _ = Imports(wasm)
		_, _ = Exports(wasm)
		_, _ = MinMemoryPages(wasm)
		if _, err := Parse(wasm); err != nil {
			return
		}
		with, err := WithCustom(wasm, "fuzz", []byte("payload"))
		require.NoError(t, err)
		got, found, err := Custom(with, "fuzz")
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, "payload", string(got))
		again, err := WithoutCustom(with, "fuzz")
		require.NoError(t, err)
		without, err := WithoutCustom(wasm, "fuzz")
		require.NoError(t, err)
		assert.Equal(t, without, again)
	})
}
