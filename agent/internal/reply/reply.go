// Package reply is a command's results as the agent keeps them: one
// COMMAND_RESULTS message, encoded once in the link's encoding and made
// to fit a frame, whose bytes the outbox records and the link sends as
// they are; and the ids that name a command and its results in every
// line logged about them.
package reply

import (
	"log/slog"

	"github.com/edgeaip/edgeaip/protocol"
)

// Reply is a COMMAND_RESULTS message encoded once. It keeps the message
// without its results, which live only in the encoded frame, and their
// call_ids, which name them in logs and in failures put in their place.
type Reply struct {
	head  protocol.ClientMessage // the message, its results left out
	calls []string               // the call_id of each result, in order
	frame protocol.Frame
}

// Encode validates m and encodes it in enc, as the link sends it (invalid
// UTF-8 replaced, with a warning to log).
func Encode(m *protocol.ClientMessage, enc protocol.Encoding, log *slog.Logger) (Reply, error) {
	f, err := enc.EncodeFrame(m, log)
	if err != nil {
		return Reply{}, err
	}
	return of(m, f), nil
}

// Decode reads back a reply from a frame Encode made. It reads the
// message's fields and its results' call_ids, and skips their values:
// the frame is what is kept of them.
func Decode(f protocol.Frame) (Reply, error) {
	var h struct {
		protocol.ClientMessage
		ActionResults []struct {
			CallID string `cbor:"call_id"`
		} `cbor:"action_results"`
	}
	if err := f.Encoding.UnmarshalValue(f.Data, &h); err != nil {
		return Reply{}, err
	}
	calls := make([]string, len(h.ActionResults))
	for i, res := range h.ActionResults {
		calls[i] = res.CallID
	}
	return Reply{head: h.ClientMessage, calls: calls, frame: f}, nil
}

func of(m *protocol.ClientMessage, f protocol.Frame) Reply {
	head := *m
	head.ActionResults = nil
	return Reply{head: head, calls: protocol.ResultCallIDs(m.ActionResults), frame: f}
}

// In is r in enc: r itself if it is in enc already, else r decoded and
// encoded anew, for results recorded by an agent that spoke the other
// encoding.
func (r Reply) In(enc protocol.Encoding, log *slog.Logger) (Reply, error) {
	if r.frame.Encoding == enc {
		return r, nil
	}
	var m protocol.ClientMessage
	if err := r.frame.Encoding.UnmarshalValue(r.frame.Data, &m); err != nil {
		return Reply{}, err
	}
	return Encode(&m, enc, log)
}

// Frame is the encoded message: what is recorded and sent.
func (r Reply) Frame() protocol.Frame { return r.frame }

// Size is how many bytes the message takes on the link.
func (r Reply) Size() int64 { return int64(len(r.frame.Data)) }

// ResponseID is the response_id of the command the results answer.
func (r Reply) ResponseID() string { return r.head.PrevResponseID }

// RequestID is the request_id of the message, which the server's
// acknowledgement names.
func (r Reply) RequestID() string { return r.head.RequestID }

// CallIDs are the call_ids of the results, in order.
func (r Reply) CallIDs() []string { return r.calls }

// Failed is the same message with every result a failure saying why: what
// stands in for results that cannot be kept or sent.
func (r Reply) Failed(why string) *protocol.ClientMessage {
	m := r.head
	m.ActionResults = protocol.FailAll(r.calls, why)
	return &m
}

// Log is log for the results r carries: their command's ids, and r's
// request_id, which the server's ack or refusal names.
func (r Reply) Log(log *slog.Logger) *slog.Logger {
	return CommandLog(log, r.head.SessionID, r.head.PrevResponseID, r.calls).With("request_id", r.head.RequestID)
}

// CommandLog is log for one command, naming the ids an operator greps
// for: its session, response and call ids.
func CommandLog(log *slog.Logger, sessionID, responseID string, callIDs []string) *slog.Logger {
	return log.With("session_id", sessionID, "response_id", responseID, "call_id", protocol.JoinCallIDs(callIDs))
}
