package server

import (
	"github.com/edgeaip/edgeaip/server/internal/cluster"
	"github.com/edgeaip/edgeaip/server/internal/identity"
)

// Revocation is an identity, or some of its tokens, that stopped working:
// revoked, or at the end of a rotation's grace. In a cluster each node
// hears of it: Config.OnRevoke carries it out, and Server.Revoked takes
// it in. See identity.Revocation.
type Revocation = identity.Revocation

// Revoked makes v act on this node: the identity's tokens are read from
// the store again by the next request that carries one, and the open
// surfaces v covers close. It is the one place a revocation takes effect,
// whether made here or on another node of a cluster, whose
// Config.OnRevoke carried it here.
func (s *Server) Revoked(v Revocation) {
	s.auth.Revoked(v)
	s.mcp.Revoked(v)
}

// publishRevocation closes the open surfaces v covers here, and hands
// it to Config.OnRevoke, for the rest of a cluster: the store already
// refuses it to new requests.
func (s *Server) publishRevocation(v Revocation) {
	s.Revoked(v)
	if s.cfg.OnRevoke != nil {
		s.cfg.OnRevoke(v)
	}
	if s.cluster == nil {
		return
	}
	if err := s.cluster.PublishRevocation(cluster.Revocation{Identity: v.Identity, TokenIDs: v.TokenIDs}); err != nil {
		s.log.Error("cluster: other nodes not told of a revocation; the store refuses its tokens there, but what they opened stays open", "identity", v.Identity, "err", err)
	}
}
