package agentrelease

import (
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sample() Release {
	return Release{Version: "1.2.3", OS: "linux", Arch: "arm64", SHA256: strings.Repeat("ab", 32), Size: 11 << 20}
}

func TestASignedReleaseVerifiesOnlyAgainstItsKeyAndUnaltered(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	other, _, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	r := Sign(sample(), priv)
	assert.NoError(t, r.Verify([]ed25519.PublicKey{other, pub}))
	assert.ErrorIs(t, r.Verify([]ed25519.PublicKey{other}), ErrUnknownKey)
	assert.ErrorIs(t, sample().Verify([]ed25519.PublicKey{pub}), ErrUnsigned)
	for name, alter := range map[string]func(*Release){
		"version": func(r *Release) { r.Version = "1.2.4" },
		"os":      func(r *Release) { r.OS = "windows" },
		"arch":    func(r *Release) { r.Arch = "amd64" },
		"digest":  func(r *Release) { r.SHA256 = strings.Repeat("cd", 32) },
		"size":    func(r *Release) { r.Size++ },
	} {
		a := r
		alter(&a)
		assert.ErrorIs(t, a.Verify([]ed25519.PublicKey{pub}), ErrBadSignature, name)
	}
}

func TestCheckNamesTheMalformedField(t *testing.T) {
	for field, alter := range map[string]func(*Release){
		"version": func(r *Release) { r.Version = "1 2" },
		"os":      func(r *Release) { r.OS = "Linux" },
		"arch":    func(r *Release) { r.Arch = "" },
		"sha256":  func(r *Release) { r.SHA256 = "abc" },
		"size":    func(r *Release) { r.Size = MaxSize + 1 },
	} {
		r := sample()
		alter(&r)
		err := r.Check()
		require.Error(t, err, field)
		assert.True(t, strings.HasPrefix(err.Error(), field+" "), "%s: %v", field, err)
	}
	assert.NoError(t, sample().Check())
}
