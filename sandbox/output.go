package sandbox

import (
	"bytes"
	"errors"
	"unicode/utf8"
)

// errOutputCap is what a tool's write returns once its cap is reached.
var errOutputCap = errors.New("output cap reached")

// cappedBuffer keeps at most max bytes and remembers that more was offered.
// It calls onOverflow once, so the call can be stopped instead of spinning
// on failed writes.
type cappedBuffer struct {
	buf        bytes.Buffer
	max        int
	overflow   bool
	onOverflow func()
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if len(p) <= room {
		return c.buf.Write(p)
	}
	c.buf.Write(p[:max(room, 0)])
	if !c.overflow {
		c.overflow = true
		if c.onOverflow != nil {
			c.onOverflow()
		}
	}
	return max(room, 0), errOutputCap
}

// tail returns the last n bytes, on a UTF-8 boundary where possible.
func (c *cappedBuffer) tail(n int) string {
	b := c.buf.Bytes()
	if len(b) <= n {
		return string(b)
	}
	b = b[len(b)-n:]
	// A character is at most 4 bytes: skip at most 3 continuation bytes.
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return "…" + string(b)
}
