package protocol

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// WireVersion is the version of the CBOR wire this build speaks: the N of
// its subprotocol, aip.cbor.vN ([Subprotocol]). It alone decides whether
// an agent and a server can link, whatever their releases. Within one
// wire version, a change must be one an older peer passes over (a new
// field, which decoders ignore); a new message type or enum value, which
// it refuses as malformed, needs the next one. JSON, UFO's wire, carries
// no version of ours.
const WireVersion = 1

// wirePrefix is the subprotocols' prefix, before the version.
const wirePrefix = "aip.cbor.v"

// WireMismatch is an upgrade whose client offered only versions of the
// CBOR wire other than [WireVersion].
type WireMismatch struct {
	// Offered are the subprotocols the client offered that name a
	// version of the CBOR wire.
	Offered []string
}

func (e *WireMismatch) Error() string {
	return fmt.Sprintf("offers %s, not %s", strings.Join(e.Offered, ", "), Subprotocol)
}

// Newer reports whether the client speaks a newer wire than this build:
// it offered a version above [WireVersion] (and none that this build
// speaks).
func (e *WireMismatch) Newer() bool {
	return slices.ContainsFunc(e.Offered, func(s string) bool {
		n, err := strconv.Atoi(strings.TrimPrefix(s, wirePrefix))
		return err == nil && n > WireVersion
	})
}

// Explain is the refusal told to the client, naming both sides (client,
// the agent with its version, and server, likewise) and what to do.
func (e *WireMismatch) Explain(client, server string) string {
	if e.Newer() {
		return fmt.Sprintf("%s speaks %s, newer than %s, which speaks %s: upgrade the server, or run an agent release that speaks %s",
			client, strings.Join(e.Offered, ", "), server, Subprotocol, Subprotocol)
	}
	return fmt.Sprintf("%s speaks %s, older than %s, which speaks %s: update the agent to a release that speaks %s",
		client, strings.Join(e.Offered, ", "), server, Subprotocol, Subprotocol)
}

// CheckOffer refuses, with a *WireMismatch, an upgrade whose client
// offers versions of the CBOR wire but not this build's. A client that
// offers none speaks JSON, and passes.
func CheckOffer(r *http.Request) error {
	var ours []string
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s == Subprotocol {
				return nil
			} else if strings.HasPrefix(s, wirePrefix) {
				ours = append(ours, s)
			}
		}
	}
	if len(ours) == 0 {
		return nil
	}
	return &WireMismatch{Offered: ours}
}
