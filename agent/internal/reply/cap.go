package reply

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"

	"github.com/edgeaip/edgeaip/protocol"
)

// Cap measures values as the link encodes them, against the cap on one
// frame. A COMMAND_RESULTS message over the cap can never be sent, so the
// agent makes its results fit before it records them.
type Cap struct {
	Enc protocol.Encoding
	Max int64
}

// Size is how many bytes v takes on the link, or an error if it cannot be
// encoded at all.
func (c Cap) Size(v any) (int64, error) {
	b, err := c.Enc.Marshal(v)
	return int64(len(b)), err
}

// Fit encodes m once, and if it fits in one frame, that is the reply.
// Else the results that cannot be encoded, then the largest, one by one,
// become failures that say so, in a copy of m, until it fits. If even a
// reply of failures does not, Fit does what it can: delivery then sends
// it in another form or leaves it, without holding up the others. Each
// result failed is logged to log. The error is for a message that cannot
// be encoded at all.
func (c Cap) Fit(m *protocol.ClientMessage, log *slog.Logger) (Reply, error) {
	if r, err := Encode(m, c.Enc, log); err == nil && r.Size() <= c.Max {
		return r, nil
	}
	out := c.shrink(m)
	for i, r := range out.ActionResults {
		if r.Error != m.ActionResults[i].Error {
			log.Warn("result too large for the link; a failure goes in its place", "action_call_id", r.CallID, "error", r.Error)
		}
	}
	return Encode(out, c.Enc, log)
}

// shrink is a copy of m with as few results failed as it takes to fit.
func (c Cap) shrink(m *protocol.ClientMessage) *protocol.ClientMessage {
	out := *m
	out.ActionResults = slices.Clone(m.ActionResults)
	sizes := make([]int64, len(out.ActionResults))
	order := make([]int, 0, len(out.ActionResults))
	for i, r := range out.ActionResults {
		n, err := c.Size(r)
		if err != nil {
			out.ActionResults[i] = c.TooBig(r, 0, err)
			n, _ = c.Size(out.ActionResults[i])
		}
		sizes[i] = n
		order = append(order, i)
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(sizes[b], sizes[a]) })
	total, err := c.Size(&out)
	if err != nil {
		return &out
	}
	for _, i := range order {
		// The sizes of the results only estimate their part of the
		// message: measure the message itself before stopping.
		if total <= c.Max {
			if total, err = c.Size(&out); err == nil && total <= c.Max {
				break
			}
		}
		failed := c.TooBig(out.ActionResults[i], sizes[i], nil)
		n, _ := c.Size(failed)
		total -= sizes[i] - n
		out.ActionResults[i] = failed
	}
	return &out
}

// TooBig is the failure that takes the place of r, of n bytes on the link
// or not encodable at all (err).
func (c Cap) TooBig(r protocol.Result, n int64, err error) protocol.Result {
	msg := fmt.Sprintf("result of %d bytes exceeds the link's frame cap of %d bytes", n, c.Max)
	if err != nil {
		msg = fmt.Sprintf("result cannot be sent: %v", err)
	}
	return protocol.Result{Status: protocol.ResultFailure, Error: msg, Namespace: r.Namespace, CallID: r.CallID, Usage: r.Usage}
}
