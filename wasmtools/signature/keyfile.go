package signature

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// PEM block types of key files: PKCS #8 and PKIX, as openssl writes them.
const (
	privateKeyType = "PRIVATE KEY"
	publicKeyType  = "PUBLIC KEY"
)

// GenerateKey makes a new key pair.
func GenerateKey() (ed25519.PublicKey, ed25519.PrivateKey, error) {
	return ed25519.GenerateKey(rand.Reader)
}

// EncodePrivateKey returns priv as a PEM PKCS #8 block.
func EncodePrivateKey(priv ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: privateKeyType, Bytes: der}), nil
}

// EncodePublicKey returns pub as a PEM PKIX block.
func EncodePublicKey(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: publicKeyType, Bytes: der}), nil
}

// LoadPrivateKey reads an ed25519 private key from a PEM file.
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	der, err := readPEM(path, privateKeyType)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("private key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("private key %s: a %T, not ed25519", path, k)
	}
	return priv, nil
}

// LoadPublicKey reads an ed25519 public key from a PEM file.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	der, err := readPEM(path, publicKeyType)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", path, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("public key %s: a %T, not ed25519", path, k)
	}
	return pub, nil
}

// LoadKeyRing reads the public key files at paths into a KeyRing.
func LoadKeyRing(paths ...string) (*KeyRing, error) {
	keys := make([]ed25519.PublicKey, 0, len(paths))
	for _, p := range paths {
		pub, err := LoadPublicKey(p)
		if err != nil {
			return nil, err
		}
		keys = append(keys, pub)
	}
	return NewKeyRing(keys...), nil
}

func readPEM(path, typ string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("key file %s: no PEM block", path)
	}
	if block.Type != typ {
		return nil, fmt.Errorf("key file %s: PEM block %q, want %q", path, block.Type, typ)
	}
	return block.Bytes, nil
}
