package protocol

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"net"
	"net/http"
)

// Buffer sizes of an accepted connection. The WebSocket library keeps the
// reader and writer Hijack gives it for the connection's life; net/http's
// are 4 KiB each, a fifth of what an idle link is to cost.
const (
	// readBufferSize holds a typical frame from a device (results, a
	// heartbeat), read in one call; a larger payload is read straight
	// into the message.
	readBufferSize = 512
	// writeBufferSize holds the longest frame header, unmasked, and the
	// start of the payload; frameWriter sends each frame in one write all
	// the same.
	writeBufferSize = 16
)

// smallBuffers is the http.ResponseWriter Accept hands the WebSocket
// library: its Hijack gives it small buffers in place of net/http's,
// which are then garbage.
type smallBuffers struct{ http.ResponseWriter }

func (w smallBuffers) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	r := bufio.NewReaderSize(conn, readBufferSize)
	if n := brw.Reader.Buffered(); n > 0 {
		// What the client sent after its upgrade request, already read:
		// it comes first, as the library expects of a hijacked reader.
		early, _ := brw.Reader.Peek(n)
		r = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(bytes.Clone(early)), conn), max(readBufferSize, n))
		if _, err := r.Peek(n); err != nil {
			conn.Close()
			return nil, nil, err
		}
	}
	return conn, bufio.NewReadWriter(r, bufio.NewWriterSize(&frameWriter{conn: conn}, writeBufferSize)), nil
}

// frameWriter is what the library's small write buffer flushes into, and
// it sends each frame in one write, so that a frame still leaves in one
// segment. The library writes a frame's header into the buffer; when the
// payload does not fit beside it, the buffer flushes the header with the
// payload's first bytes, then writes the rest at once, in the same call.
// frameWriter holds that start and sends it with the rest, in one writev.
type frameWriter struct {
	conn net.Conn
	held [writeBufferSize]byte
	n    int // bytes held: the start of a frame
	// vec is the writev of a frame, held start and rest; it lives here so
	// that a frame's write allocates nothing.
	vec  [2][]byte
	bufs net.Buffers
}

func (w *frameWriter) Write(p []byte) (int, error) {
	if w.n > 0 {
		w.vec = [2][]byte{w.held[:w.n], p}
		w.bufs, w.n = w.vec[:], 0
		_, err := w.bufs.WriteTo(w.conn)
		w.vec = [2][]byte{} // p is the caller's again
		if err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if len(p) <= len(w.held) && len(p) < frameLength(p) {
		w.n = copy(w.held[:], p)
		return len(p), nil
	}
	return w.conn.Write(p)
}

// frameLength is the length of the WebSocket frame p starts with, header
// and payload (RFC 6455, 5.2), or 0 if p is too short to tell.
func frameLength(p []byte) int {
	if len(p) < 2 {
		return 0
	}
	header, size := 2, uint64(p[1]&0x7f)
	switch size {
	case 126:
		if len(p) < 4 {
			return 0
		}
		header, size = 4, uint64(binary.BigEndian.Uint16(p[2:]))
	case 127:
		if len(p) < 10 {
			return 0
		}
		header, size = 10, binary.BigEndian.Uint64(p[2:])
	}
	if p[1]&0x80 != 0 {
		header += 4 // the mask
	}
	return header + int(min(size, math.MaxInt32))
}
