package signature

import (
	"errors"
	"fmt"
)

// Verifier decides whether a host accepts a module: which keys it trusts,
// and whether it refuses what is unsigned.
type Verifier struct {
	Keys *KeyRing
	// RequireSigned refuses modules that are unsigned or signed by a key
	// outside Keys.
	RequireSigned bool
}

// Verdict is what a Verifier found.
type Verdict struct {
	// KeyID is the key the signature names; empty for an unsigned module.
	KeyID string
	// Verified means the signature checked out against a trusted key.
	Verified bool
}

// Check accepts or refuses wasm. A signature that names a trusted key but
// does not match is always refused: the module was altered. Without
// RequireSigned, an unsigned module, or one signed by an unknown key, is
// accepted unverified.
func (v Verifier) Check(wasm []byte) (Verdict, error) {
	keyID, err := v.Keys.Verify(wasm)
	switch {
	case err == nil:
		return Verdict{KeyID: keyID, Verified: true}, nil
	case errors.Is(err, ErrUnsigned) && v.RequireSigned:
		return Verdict{}, fmt.Errorf("%w, and this host requires signed modules (require_signed)", err)
	case errors.Is(err, ErrUnknownKey) && v.RequireSigned:
		return Verdict{KeyID: keyID}, fmt.Errorf("%w, and this host requires signed modules (require_signed); trusted key ids: %v", err, v.Keys.IDs())
	case errors.Is(err, ErrUnsigned), errors.Is(err, ErrUnknownKey):
		return Verdict{KeyID: keyID}, nil
	}
	return Verdict{KeyID: keyID}, err
}
