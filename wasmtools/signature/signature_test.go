package signature

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/wasmtools/section"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func echo(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "tools", "echo.wasm"))
	require.NoError(t, err)
	return b
}

func newKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := GenerateKey()
	require.NoError(t, err)
	return pub, priv
}

func TestSignedModuleVerifiesAgainstItsKey(t *testing.T) {
	pub, priv := newKey(t)
	signed, err := Sign(echo(t), priv)
	require.NoError(t, err)
	keyID, err := NewKeyRing(pub).Verify(signed)
	require.NoError(t, err)
	assert.Equal(t, KeyID(pub), keyID)
	assert.Len(t, keyID, 16)

	unsigned, err := section.WithoutCustom(signed, SectionName)
	require.NoError(t, err)
	assert.Equal(t, echo(t), unsigned, "signing only appends the aip.sig section")
}

func TestResigningReplacesTheSignature(t *testing.T) {
	pub1, priv1 := newKey(t)
	pub2, priv2 := newKey(t)
	once, err := Sign(echo(t), priv1)
	require.NoError(t, err)
	twice, err := Sign(once, priv2)
	require.NoError(t, err)
	keyID, err := NewKeyRing(pub1, pub2).Verify(twice)
	require.NoError(t, err)
	assert.Equal(t, KeyID(pub2), keyID)
}

func TestVerifyRefusesTamperedUnsignedAndForeignModules(t *testing.T) {
	pub, priv := newKey(t)
	_, otherPriv := newKey(t)
	ring := NewKeyRing(pub)
	signed, err := Sign(echo(t), priv)
	require.NoError(t, err)

	tampered := append([]byte{}, signed...)
	tampered[20] ^= 0x01 // inside the code, before the signature section
	_, err = ring.Verify(tampered)
	assert.ErrorIs(t, err, ErrBadSignature)

	withManifest, err := section.WithCustom(signed, "aip.tool", []byte(`{"name":"evil"}`))
	require.NoError(t, err)
	_, err = ring.Verify(withManifest)
	assert.ErrorIs(t, err, ErrBadSignature, "a section added after signing is covered too")

	_, err = ring.Verify(echo(t))
	assert.ErrorIs(t, err, ErrUnsigned)

	foreign, err := Sign(echo(t), otherPriv)
	require.NoError(t, err)
	_, err = ring.Verify(foreign)
	assert.ErrorIs(t, err, ErrUnknownKey)

	garbled, err := section.WithCustom(echo(t), SectionName, []byte(`{"alg":"rsa","key_id":"x","sig":""}`))
	require.NoError(t, err)
	_, err = ring.Verify(garbled)
	assert.ErrorContains(t, err, `algorithm "rsa"`)
}

func TestVerifierAppliesRequireSigned(t *testing.T) {
	pub, priv := newKey(t)
	_, otherPriv := newKey(t)
	signed, err := Sign(echo(t), priv)
	require.NoError(t, err)
	foreign, err := Sign(echo(t), otherPriv)
	require.NoError(t, err)
	tampered := append([]byte{}, signed...)
	tampered[20] ^= 0x01

	strict := Verifier{Keys: NewKeyRing(pub), RequireSigned: true}
	lax := Verifier{Keys: NewKeyRing(pub)}

	v, err := strict.Check(signed)
	require.NoError(t, err)
	assert.Equal(t, Verdict{KeyID: KeyID(pub), Verified: true}, v)

	_, err = strict.Check(echo(t))
	assert.ErrorIs(t, err, ErrUnsigned)
	assert.ErrorContains(t, err, "require_signed")
	_, err = strict.Check(foreign)
	assert.ErrorIs(t, err, ErrUnknownKey)

	v, err = lax.Check(echo(t))
	require.NoError(t, err)
	assert.Equal(t, Verdict{}, v)
	v, err = lax.Check(foreign)
	require.NoError(t, err)
	assert.False(t, v.Verified)

	_, err = lax.Check(tampered)
	assert.ErrorIs(t, err, ErrBadSignature, "a broken signature is refused even when signatures are optional")
	_, err = Verifier{}.Check(echo(t))
	assert.NoError(t, err, "no keys, nothing required")
}

func TestKeyFilesRoundTrip(t *testing.T) {
	pub, priv := newKey(t)
	dir := t.TempDir()
	privPEM, err := EncodePrivateKey(priv)
	require.NoError(t, err)
	pubPEM, err := EncodePublicKey(pub)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "k.key"), privPEM, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "k.pub"), pubPEM, 0o644))

	gotPriv, err := LoadPrivateKey(filepath.Join(dir, "k.key"))
	require.NoError(t, err)
	assert.Equal(t, priv, gotPriv)
	ring, err := LoadKeyRing(filepath.Join(dir, "k.pub"))
	require.NoError(t, err)
	assert.Equal(t, []string{KeyID(pub)}, ring.IDs())

	_, err = LoadPublicKey(filepath.Join(dir, "k.key"))
	assert.ErrorContains(t, err, `PEM block "PRIVATE KEY", want "PUBLIC KEY"`)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "junk"), []byte("hello"), 0o644))
	_, err = LoadPrivateKey(filepath.Join(dir, "junk"))
	assert.ErrorContains(t, err, "no PEM block")
}
