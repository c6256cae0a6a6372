package tlsfiles

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testpki"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFilesThatDoNotReadAreNamedWithWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "missing.pem"): "no such file or directory",
		write("empty.pem", ""):            "empty.pem: no PEM certificate in it",
		write("key.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"): "key.pem: no PEM certificate in it",
		write("bad.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"): "bad.pem: certificate 1:",
	} {
		_, err := CertPool(path)
		require.Error(t, err, path)
		assert.Contains(t, err.Error(), want)
	}
}

func TestABundleAndAKeyPairRead(t *testing.T) {
	a, b := testpki.NewCA(t, "a"), testpki.NewCA(t, "b")
	bundle := filepath.Join(t.TempDir(), "bundle.pem")
	require.NoError(t, os.WriteFile(bundle, append(a.CertPEM(), b.CertPEM()...), 0o600))
	certs, err := Certificates(bundle)
	require.NoError(t, err)
	assert.Len(t, certs, 2)

	issued := a.Issue(t, testpki.Loopback())
	cert, key := issued.Write(t, t.TempDir(), "server")
	pair, err := KeyPair(cert, key)
	require.NoError(t, err)
	assert.Equal(t, issued.Cert.SerialNumber, pair.Leaf.SerialNumber)

	_, otherKey := b.Issue(t, testpki.Loopback()).Write(t, t.TempDir(), "other")
	_, err = KeyPair(cert, otherKey)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate "+cert+" with key "+otherKey)
}
