// Package signature signs tool modules and checks their signatures.
//
// A signature lives in the module's custom section "aip.sig", as JSON
// {"alg": "ed25519", "key_id": ..., "sig": base64}. It is an ed25519
// signature over the module's bytes with that section left out, so the
// manifest and every other section are covered, and signing does not
// change what is signed.
package signature

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/edgeaip/edgeaip/wasmtools/section"
)

// SectionName is the custom section that holds the signature.
const SectionName = "aip.sig"

// Algorithm is the only signature algorithm.
const Algorithm = "ed25519"

// Errors a failed check wraps, for errors.Is.
var (
	ErrUnsigned     = errors.New("module is not signed")
	ErrUnknownKey   = errors.New("signed by a key this host does not trust")
	ErrBadSignature = errors.New("signature does not match the module: it was altered after signing, or the signature is forged")
)

// Signature is the content of the aip.sig section.
type Signature struct {
	Alg   string `json:"alg"`
	KeyID string `json:"key_id"`
	Sig   []byte `json:"sig"`
}

// KeyID names a public key: the first 8 bytes of its SHA-256, in hex.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// Sign returns wasm signed with priv, replacing any signature it had.
func Sign(wasm []byte, priv ed25519.PrivateKey) ([]byte, error) {
	msg, err := section.WithoutCustom(wasm, SectionName)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	s := Signature{Alg: Algorithm, KeyID: KeyID(priv.Public().(ed25519.PublicKey)), Sig: ed25519.Sign(priv, msg)}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	return section.WithCustom(msg, SectionName, b)
}

// Read returns the signature wasm carries; found is false if it has none.
func Read(wasm []byte) (s Signature, found bool, err error) {
	payload, found, err := section.Custom(wasm, SectionName)
	if err != nil || !found {
		return Signature{}, false, err
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Signature{}, true, fmt.Errorf("section %s: %w", SectionName, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Signature{}, true, fmt.Errorf("section %s: trailing data after the JSON object", SectionName)
	}
	if s.Alg != Algorithm {
		return Signature{}, true, fmt.Errorf("section %s: algorithm %q: only %s is supported", SectionName, s.Alg, Algorithm)
	}
	if len(s.Sig) != ed25519.SignatureSize {
		return Signature{}, true, fmt.Errorf("section %s: signature is %d bytes, want %d", SectionName, len(s.Sig), ed25519.SignatureSize)
	}
	return s, true, nil
}

// KeyRing is a set of trusted public keys, by key id.
type KeyRing struct {
	keys map[string]ed25519.PublicKey
}

// NewKeyRing trusts keys.
func NewKeyRing(keys ...ed25519.PublicKey) *KeyRing {
	k := &KeyRing{keys: map[string]ed25519.PublicKey{}}
	for _, pub := range keys {
		k.keys[KeyID(pub)] = pub
	}
	return k
}

// Len is the number of trusted keys; a nil KeyRing has none.
func (k *KeyRing) Len() int {
	if k == nil {
		return 0
	}
	return len(k.keys)
}

// IDs lists the trusted key ids, sorted.
func (k *KeyRing) IDs() []string {
	if k == nil {
		return nil
	}
	ids := make([]string, 0, len(k.keys))
	for id := range k.keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Verify checks that wasm is signed by a key of the ring, and returns that
// key's id. It fails with ErrUnsigned, ErrUnknownKey, ErrBadSignature or
// an error about a malformed signature section.
func (k *KeyRing) Verify(wasm []byte) (string, error) {
	s, found, err := Read(wasm)
	if err != nil {
		return "", err
	}
	if !found {
		return "", ErrUnsigned
	}
	var pub ed25519.PublicKey
	if k != nil {
		pub = k.keys[s.KeyID]
	}
	if pub == nil {
		return s.KeyID, fmt.Errorf("%w: key id %s", ErrUnknownKey, s.KeyID)
	}
	msg, err := section.WithoutCustom(wasm, SectionName)
	if err != nil {
		return s.KeyID, err
	}
	if !ed25519.Verify(pub, msg, s.Sig) {
		return s.KeyID, fmt.Errorf("%w (key id %s)", ErrBadSignature, s.KeyID)
	}
	return s.KeyID, nil
}
