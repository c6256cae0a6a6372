package dispatch

import (
	"fmt"

	"github.com/edgeaip/edgeaip/protocol"
)

// FrameSize is the size of m as one frame in enc.
func FrameSize(enc protocol.Encoding, m *protocol.ServerMessage) (int, error) {
	b, err := enc.Marshal(m)
	return len(b), err
}

// FrameTooBig says that a COMMAND frame of size bytes in enc is over the
// frame cap.
func FrameTooBig(size int, enc protocol.Encoding, frameCap int64) string {
	return fmt.Sprintf("its COMMAND frame is %d bytes in %s, more than the frame cap of %d", size, enc, frameCap)
}
