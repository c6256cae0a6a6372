package abi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// module is a module exporting functions of those names, each () -> ().
func module(names ...string) []byte {
	b := []byte("\x00asm\x01\x00\x00\x00")
	b = append(b, 1, 4, 1, 0x60, 0, 0)                     // type section: () -> ()
	b = append(b, 3, byte(1+len(names)), byte(len(names))) // function section
	for range names {
		b = append(b, 0)
	}
	var exp []byte
	for i, n := range names {
		exp = append(append(append(exp, byte(len(n))), n...), 0, byte(i))
	}
	b = append(b, 7, byte(1+len(exp)), byte(len(names)))
	b = append(b, exp...)
	code := []byte{byte(len(names))}
	for range names {
		code = append(code, 2, 0, 0x0b)
	}
	return append(append(b, 10, byte(len(code))), code...)
}

func TestTheFormIsToldByTheExports(t *testing.T) {
	for _, tc := range []struct {
		exports []string
		want    Form
	}{
		{[]string{"_start"}, Command},
		{[]string{"_start", "_initialize"}, Command},
		{[]string{"_initialize", "aip_call"}, Reactor},
		{[]string{"aip_call"}, Reactor},
	} {
		got, err := FormOf(module(tc.exports...))
		require.NoError(t, err, tc.exports)
		assert.Equal(t, tc.want, got, tc.exports)
	}
}

func TestAModuleOfNeitherFormIsRefused(t *testing.T) {
	_, err := FormOf(module("_initialize"))
	assert.ErrorIs(t, err, ErrNoForm)
	_, err = FormOf(module("_start", "aip_call"))
	assert.ErrorContains(t, err, "exports both _start and aip_call: a reactor built as a command? (Go: build with -buildmode=c-shared)")
	_, err = FormOf([]byte("not wasm"))
	assert.Error(t, err)
}
