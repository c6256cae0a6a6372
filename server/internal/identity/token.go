package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"strings"

	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// Token prefixes say what a token is for when one turns up in a file.
const (
	// DeviceTokenPrefix begins a device's token.
	DeviceTokenPrefix = "aipd_"
	// OperatorTokenPrefix begins an operator identity's token.
	OperatorTokenPrefix = "aipo_"
)

// NewToken returns prefix followed by 256 random bits.
func NewToken(prefix string) string {
	b := make([]byte, 32)
	rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// HashToken is how tokens are stored. Tokens carry 256 random bits, so a
// plain SHA-256 is enough: there is nothing to brute-force.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// sameHash compares two hex hashes in constant time.
func sameHash(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// RequestToken is the credential of a request: the bearer token, UFO's
// X-API-Key header, or, for WebSocket devices only, UFO's ?token= query.
func RequestToken(r *http.Request, allowQuery bool) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if t, ok := strings.CutPrefix(h, "Bearer "); ok {
			return strings.TrimSpace(t)
		}
	}
	if k := r.Header.Get("X-API-Key"); k != "" {
		return strings.TrimSpace(k)
	}
	if allowQuery {
		return r.URL.Query().Get("token")
	}
	return ""
}

// LoadOrCreateAdminToken returns the operator token in path, writing a
// new one there (mode 0600) if the file does not exist.
func LoadOrCreateAdminToken(path string) (token string, created bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		token := NewToken(OperatorTokenPrefix)
		if err := writeFileSync(path, []byte(token+"\n"), 0o600); err != nil {
			return "", false, fmt.Errorf("write operator token: %w", err)
		}
		return token, true, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read operator token: %w", err)
	}
	token = strings.TrimSpace(string(b))
	if token == "" {
		return "", false, fmt.Errorf("operator token file %s is empty", path)
	}
	return token, false, nil
}

// BootstrapIdentity is the identity the token in admin.token acts for.
const BootstrapIdentity = "admin"

// BootstrapAdmin gives token, admin.token's, an identity when the store
// has none: an unscoped admin named bootstrapIdentity. That is the first
// start, or the first after an upgrade from the server that had only
// that one token. Once there are identities, admin.token is a token like
// any other: rotating or revoking it ends it, and it does not come back
// on a restart. It reports whether the token is live.
func BootstrapAdmin(ctx context.Context, st *store.Store, token string) (live bool, err error) {
	err = st.Write(ctx, func(tx *store.Tx) error {
		n, err := tx.Identities().Count()
		if err != nil || n > 0 {
			return err
		}
		return tx.Identities().Create(store.Identity{Name: BootstrapIdentity, Role: access.Admin.String()},
			store.Token{ID: newTokenID(), Hash: HashToken(token)})
	})
	if err != nil {
		return false, fmt.Errorf("bootstrap admin identity: %w", err)
	}
	_, _, err = st.Identities().TokenByHash(ctx, HashToken(token))
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// NewOperatorToken is a fresh token for the operator identity named
// identity, and its record, which holds only its hash.
func NewOperatorToken(identity string) (string, store.Token) {
	token := NewToken(OperatorTokenPrefix)
	return token, store.Token{ID: newTokenID(), Identity: identity, Hash: HashToken(token)}
}

// newTokenID is a token's public id: 64 random bits, in hex.
func newTokenID() string {
	b := make([]byte, 8)
	rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

// writeFileSync creates path exclusively and makes it durable.
func writeFileSync(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
