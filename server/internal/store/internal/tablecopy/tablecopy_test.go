package tablecopy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The digest tells tables apart by their content, in any order of rows.
func TestTheRowDigestIsTheContentsNotTheirOrder(t *testing.T) {
	cols := []string{"id", "n", "x"}
	rows := [][]any{{"a", int64(1), nil}, {"b", int64(2), "t"}, {"c", int64(3), 1.5}}
	var fwd, rev, other rowSum
	for i := range rows {
		fwd.add(cols, rows[i])
		rev.add(cols, rows[len(rows)-1-i])
	}
	assert.Equal(t, fwd.hex(), rev.hex())
	other.add(cols, rows[0])
	other.add(cols, rows[1])
	other.add(cols, []any{"c", int64(3), "1.5"})
	assert.NotEqual(t, fwd.hex(), other.hex(), "a text is not a number")
}
