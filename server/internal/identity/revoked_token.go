package identity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/store"
)

// RevokedError is the error of a token that was revoked, a device's or an
// identity's. Its holder is told so, and when: it holds the token, so it
// learns nothing it could not know; a token never issued finds no
// revoked one, and its caller hears only that it is wrong. It is
// ErrWrongToken all the same, and counts toward its source's limit of
// failures.
type RevokedError struct{ Token store.RevokedToken }

func (e *RevokedError) Error() string {
	return fmt.Sprintf("this token of %s %q was revoked at %s", e.Token.Kind, e.Token.Owner, e.Token.RevokedAt.UTC().Format(time.RFC3339))
}

// Is makes a RevokedError ErrWrongToken.
func (e *RevokedError) Is(target error) bool { return target == ErrWrongToken }

// wrongOrRevoked is the error of a token hash that is no live token: a
// RevokedError if it was revoked, else ErrWrongToken.
func (a *Authority) wrongOrRevoked(ctx context.Context, hash string) error {
	r, err := a.store.RevokedToken(ctx, hash)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return ErrWrongToken
	case err != nil:
		return err
	}
	return &RevokedError{Token: r}
}
