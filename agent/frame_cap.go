package agent

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/edgeaip/edgeaip/protocol"
)

// frameCap measures values as the link encodes them, against the cap on
// one frame. A COMMAND_RESULTS message over the cap can never be sent, so
// the agent makes its results fit before it records them.
type frameCap struct {
	enc protocol.Encoding
	max int64
}

// size is how many bytes v takes on the link, or an error if it cannot be
// encoded at all.
func (c frameCap) size(v any) (int64, error) {
	b, err := c.enc.Marshal(v)
	return int64(len(b)), err
}

// fit returns reply if it fits in one frame, else a copy in which the
// results that cannot be encoded, then the largest, one by one, are
// failures that say so, until it fits. If even a reply of failures does
// not, fit does what it can: delivery then sends it in another form or
// leaves it, without holding up the others.
func (c frameCap) fit(reply *protocol.ClientMessage) *protocol.ClientMessage {
	if total, err := c.size(reply); err == nil && total <= c.max {
		return reply
	}
	out := *reply
	out.ActionResults = slices.Clone(reply.ActionResults)
	sizes := make([]int64, len(out.ActionResults))
	order := make([]int, 0, len(out.ActionResults))
	for i, r := range out.ActionResults {
		n, err := c.size(r)
		if err != nil {
			out.ActionResults[i] = c.tooBig(r, 0, err)
			n, _ = c.size(out.ActionResults[i])
		}
		sizes[i] = n
		order = append(order, i)
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(sizes[b], sizes[a]) })
	total, err := c.size(&out)
	if err != nil {
		return &out
	}
	for _, i := range order {
		// The sizes of the results only estimate their part of the
		// message: measure the message itself before stopping.
		if total <= c.max {
			if total, err = c.size(&out); err == nil && total <= c.max {
				break
			}
		}
		failed := c.tooBig(out.ActionResults[i], sizes[i], nil)
		n, _ := c.size(failed)
		total -= sizes[i] - n
		out.ActionResults[i] = failed
	}
	return &out
}

// tooBig is the failure that takes the place of r, of n bytes on the link
// or not encodable at all (err).
func (c frameCap) tooBig(r protocol.Result, n int64, err error) protocol.Result {
	msg := fmt.Sprintf("result of %d bytes exceeds the link's frame cap of %d bytes", n, c.max)
	if err != nil {
		msg = fmt.Sprintf("result cannot be sent: %v", err)
	}
	return protocol.Result{Status: protocol.ResultFailure, Error: msg, Namespace: r.Namespace, CallID: r.CallID, Usage: r.Usage}
}

// failAll is reply with every result a failure saying why: the last
// resort for results the link refused.
func failAll(reply *protocol.ClientMessage, why error) *protocol.ClientMessage {
	out := *reply
	out.ActionResults = protocol.FailAll(protocol.ResultCallIDs(reply.ActionResults), why.Error())
	return &out
}
