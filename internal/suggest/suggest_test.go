package suggest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNearestFindsTheLikelyTypo(t *testing.T) {
	tools := []string{"read_file", "write_file", "list_dir", "hash_file"}
	for name, want := range map[string]string{
		"hash_fiel":  "hash_file", // a swap is one edit
		"Hash_File":  "hash_file", // case is no edit
		"red_file":   "read_file",
		"list_dirs":  "list_dir",
		"delete_all": "",           // nothing like it
		"hash_file":  "",           // not a typo
		"ls":         "",           // too short to guess from
		"wrte_fle":   "write_file", // two edits in eight characters
	} {
		assert.Equal(t, want, Nearest(name, tools), name)
	}
	assert.Equal(t, "parameters", Nearest("paramters", []string{"tool", "tool_name", "parameters", "timeout"}))
	assert.Equal(t, "timeout", Nearest("timout", []string{"tool", "tool_name", "parameters", "timeout"}))
	assert.Equal(t, "; did you mean hash_file?", DidYouMean("hash_fiel", tools))
	assert.Equal(t, "", DidYouMean("delete_all", tools))
}

func TestDistanceCountsEdits(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"", "ab", 2}, {"ab", "ba", 1}, {"kitten", "sitting", 3}, {"héllo", "hello", 1}} {
		assert.Equal(t, c.d, distance(c.a, c.b), "%q %q", c.a, c.b)
		assert.Equal(t, c.d, distance(c.b, c.a), "%q %q", c.b, c.a)
	}
}
