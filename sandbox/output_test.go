package sandbox

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestTailStartsOnAWholeCharacter(t *testing.T) {
	for _, text := range []string{"aaaa€€€€", "aaaa😀😀", "aaaaé", "plain ascii text"} {
		c := &cappedBuffer{max: 1 << 10}
		c.Write([]byte(text))
		for n := 1; n < len(text); n++ {
			got := c.tail(n)
			assert.True(t, utf8.ValidString(got), "tail(%d) of %q = %q", n, text, got)
			assert.True(t, strings.HasSuffix(text, strings.TrimPrefix(got, "…")), "tail(%d) of %q = %q", n, text, got)
		}
	}
}
