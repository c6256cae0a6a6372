package driverstmt

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scanValue stores a driver's value as database/sql's Scan does: a NULL
// only into what can hold one, bytes copied, numbers and text converted.
func TestScanValueConvertsAsDatabaseSQLDoes(t *testing.T) {
	var (
		a  any = "before"
		b      = []byte("before")
		ns     = sql.NullString{String: "before", Valid: true}
		s  string
		i  int
		f  float64
		ok bool
	)
	require.NoError(t, scanValue(&a, nil))
	assert.Nil(t, a)
	require.NoError(t, scanValue(&b, nil))
	assert.Nil(t, b)
	require.NoError(t, scanValue(&ns, nil))
	assert.Equal(t, sql.NullString{}, ns)
	assert.EqualError(t, scanValue(&s, nil), "converting NULL to string is unsupported")

	src := []byte("text")
	require.NoError(t, scanValue(&b, src))
	require.NoError(t, scanValue(&a, src))
	src[0] = 'n'
	assert.Equal(t, []byte("text"), b, "a copy: the driver reuses its buffer")
	assert.Equal(t, []byte("text"), a)

	require.NoError(t, scanValue(&i, int64(42)))
	assert.Equal(t, 42, i)
	require.NoError(t, scanValue(&f, "1.5"))
	assert.Equal(t, 1.5, f)
	require.NoError(t, scanValue(&ok, int64(1)))
	assert.True(t, ok)
	require.NoError(t, scanValue(&s, int64(7)))
	assert.Equal(t, "7", s)
	assert.Error(t, scanValue(&i, "x"))
	// A type of the store's own of a kind it scans, as its TokenKind.
	type tokenKind string
	var kind tokenKind
	require.NoError(t, scanValue(&kind, []byte("sent")))
	assert.Equal(t, tokenKind("sent"), kind)
	var u uint8
	assert.EqualError(t, scanValue(&u, int64(1)), "store: scanning into *uint8 is not supported")
}
