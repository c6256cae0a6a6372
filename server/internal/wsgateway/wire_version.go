package wsgateway

import (
	"cmp"
	"errors"
	"net/http"

	"github.com/edgeaip/edgeaip/internal/version"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/identity"
)

// maxUserAgent bounds the client's User-Agent quoted back to it and
// logged.
const maxUserAgent = 120

// refuseWire refuses, with 426 and a text naming both sides' wire and
// release versions, an upgrade whose client speaks only other versions
// of the CBOR wire (protocol.CheckOffer). It reports whether it did. The
// client has authenticated: the server's version is told to no one else.
func (g *Gateway) refuseWire(w http.ResponseWriter, r *http.Request, p identity.Principal) bool {
	var mismatch *protocol.WireMismatch
	if !errors.As(protocol.CheckOffer(r), &mismatch) {
		return false
	}
	ua := r.Header.Get("User-Agent")
	client := cmp.Or(ua[:min(len(ua), maxUserAgent)], "the client")
	msg := mismatch.Explain(client, "aip-server "+version.Version())
	who := "device"
	name := ""
	if p.Device != nil {
		name = p.Device.ID
	} else if p.Operator != nil {
		who, name = "identity", p.Operator.Name
	}
	g.log.Warn("link refused: another version of the wire", who, name, "remote", r.RemoteAddr, "reason", msg)
	w.Header().Set("Upgrade", "websocket")
	http.Error(w, msg, http.StatusUpgradeRequired)
	return true
}
