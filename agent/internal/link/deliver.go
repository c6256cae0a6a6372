package link

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/agent/internal/outbox"
	"github.com/edgeaip/edgeaip/agent/internal/reply"
	"github.com/edgeaip/edgeaip/protocol"
)

// deliver sends the outbox's results on the registered link whenever
// there are some to send: once recorded, when their command comes again,
// after a registration, and while flushing. It is the only sender of
// results, so none goes out twice on one link unasked. It sends the bytes
// the outbox recorded, as they are. The server's ack of each (see handle)
// marks it delivered.
func (l *Link) deliver(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.outbox.Owing():
		case <-l.wake:
		}
		conn, num := l.current()
		if conn == nil {
			continue
		}
		for _, p := range l.outbox.Unsent(num) {
			err := l.sendFrame(ctx, conn, p.Reply.Frame())
			if errors.Is(err, protocol.ErrTooBig) {
				l.tooBigToSend(p, num, err, func(n int64) error {
					return fmt.Errorf("results of %d bytes exceed the link's frame cap of %d bytes", n, l.cap.Max)
				})
				continue
			}
			if err != nil {
				p.Reply.Log(l.log).Warn("results not delivered; they wait in the outbox", "err", err)
				break
			}
			l.outbox.MarkSent(p, num)
		}
	}
}

// sendFrame writes f within sendTimeout.
func (l *Link) sendFrame(ctx context.Context, conn *protocol.Conn, f protocol.Frame) error {
	sctx, cancel := sendContext(ctx)
	defer cancel()
	return conn.SendFrame(sctx, f)
}

// tooBigToSend handles results the link refused as larger than a frame,
// though they were made to fit when recorded: the frame cap is lower than
// it was then. They are not sent again on this link, whatever follows, so
// that they hold up no other results. If failures in their place are
// smaller, those are recorded and go out instead; if not, nothing can be
// sent for them, and they stay in the outbox until they age out.
//
// why says what went wrong for results of n bytes, for the failures.
func (l *Link) tooBigToSend(p outbox.Pending, num uint64, sendErr error, why func(n int64) error) {
	l.outbox.MarkSent(p, num)
	log := p.Reply.Log(l.log)
	n := p.Reply.Size()
	failed, err := reply.Encode(p.Reply.Failed(why(n).Error()), l.cap.Enc, log)
	if err != nil || failed.Size() >= n {
		log.Error("results cannot be sent, even as failures; they stay in the outbox", "err", sendErr)
		return
	}
	log.Error("results too large for the link; failures go out in their place", "err", sendErr)
	if err := l.outbox.Complete(failed); err != nil {
		log.Error("results not recorded; delivering them from memory", "err", err)
	}
}

// refusedAsTooBig handles a server that closed connection num with 1009
// because a frame was larger than it takes: its frame cap is below the
// agent's. The largest results that went out on it and were not
// acknowledged are the ones it refused, or larger still and so refused
// too; failures go out in their place, rather than the same results first
// on every new link.
func (l *Link) refusedAsTooBig(num uint64, closeErr error) {
	p, ok := l.outbox.LargestSentOn(num)
	if !ok {
		return
	}
	l.tooBigToSend(p, num, closeErr, func(n int64) error {
		return fmt.Errorf("results of %d bytes are more than the server takes in a frame (it closed the link with 1009)", n)
	})
}

// flushPoll is how often Flush looks at what is left to deliver.
const flushPoll = 20 * time.Millisecond

// Flush waits, up to d, for the server to acknowledge every result in the
// outbox; or, from a server that has acknowledged none (a UFO server does
// not), for every result to have gone out. With the link down there is
// nothing to wait for: the results stay in the outbox. Call it while Run
// still runs.
func (l *Link) Flush(d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		conn, num := l.current()
		n := len(l.outbox.Unsent(num))
		if l.serverAcks.Load() {
			n = l.outbox.Undelivered()
		}
		if n == 0 {
			return
		}
		if conn == nil || time.Now().After(deadline) {
			l.log.Warn("results left unacknowledged in the outbox; they go out after the next start", "count", n)
			return
		}
		notify(l.wake)
		time.Sleep(flushPoll)
	}
}
