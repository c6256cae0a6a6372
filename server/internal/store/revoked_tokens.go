package store

import (
	"context"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/revokedtokens"
)

// RevokedToken is a token that was revoked, a device's or an identity's:
// whose it was and when. Revoking a device or an identity, or one of its
// tokens, records its tokens so.
type RevokedToken = revokedtokens.Token

// The kinds of a RevokedToken.
const (
	RevokedDeviceToken   = revokedtokens.Device
	RevokedIdentityToken = revokedtokens.Identity
)

// RevokedToken is the revoked token whose hash is hash, or ErrNotFound.
func (s *Store) RevokedToken(ctx context.Context, hash string) (RevokedToken, error) {
	return revokedtokens.Find(ctx, partReader{s}, hash)
}
