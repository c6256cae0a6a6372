// Package agentrelease describes a release of aip-agent as the server
// keeps it and a device checks it: a binary for one OS and architecture,
// by its SHA-256 and size, under a version, signed with an ed25519
// release key. aipctl signs; the server keeps; the device, which trusts
// release keys of its own (separate from tool-signing keys), verifies
// before it installs a release and again before every start.
package agentrelease

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/edgeaip/edgeaip/wasmtools/signature"
)

// MaxSize bounds a release's binary: well above an agent's 10-20 MB, far
// below what would fill a small board's disk by mistake.
const MaxSize = 128 << 20

// Errors a failed check wraps, for errors.Is.
var (
	ErrUnsigned     = errors.New("release is not signed")
	ErrUnknownKey   = errors.New("release is signed by a key this device does not trust")
	ErrBadSignature = errors.New("release signature does not match: the release was altered after signing, or the signature is forged")
)

// Release is one agent binary's description; Signature covers every
// other field but KeyID, which names the key.
type Release struct {
	Version   string `json:"version"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
	KeyID     string `json:"key_id,omitempty"`
	Signature []byte `json:"signature,omitempty"`
}

var (
	versionSyntax  = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$`)
	platformSyntax = regexp.MustCompile(`^[a-z0-9]{1,16}$`)
	digestSyntax   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// keyIDSyntax is signature.KeyID's: the first 8 bytes of the public
	// key's SHA-256, in hex.
	keyIDSyntax = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// Check reports the first field that is malformed, naming it.
func (r Release) Check() error {
	if err := r.CheckVersion(); err != nil {
		return fmt.Errorf("version %w", err)
	}
	switch {
	case !platformSyntax.MatchString(r.OS):
		return fmt.Errorf("os %q: want a GOOS such as linux", r.OS)
	case !platformSyntax.MatchString(r.Arch):
		return fmt.Errorf("arch %q: want a GOARCH such as arm64", r.Arch)
	case !digestSyntax.MatchString(r.SHA256):
		return fmt.Errorf("sha256 %q: want 64 lower-case hex digits", r.SHA256)
	case r.Size <= 0 || r.Size > MaxSize:
		return fmt.Errorf("size %d: want 1 to %d bytes", r.Size, MaxSize)
	}
	return nil
}

// CheckSigned reports whether r carries a signature, well formed, and
// the id of the key that made it: ErrUnsigned if it carries none.
func (r Release) CheckSigned() error {
	switch {
	case len(r.Signature) == 0:
		return ErrUnsigned
	case !keyIDSyntax.MatchString(r.KeyID):
		return fmt.Errorf("key_id %q: want the signing key's id, 16 lower-case hex digits", r.KeyID)
	case len(r.Signature) != ed25519.SignatureSize:
		return fmt.Errorf("signature: %d bytes, want an ed25519 signature's %d", len(r.Signature), ed25519.SignatureSize)
	}
	return nil
}

// CheckVersion checks r's version alone, as a rollout names it.
func (r Release) CheckVersion() error {
	if !versionSyntax.MatchString(r.Version) {
		return fmt.Errorf("%q: want letters, digits and . + _ - (at most 64), starting with a letter or digit", r.Version)
	}
	return nil
}

// Platform is OS/ARCH, as Go spells it.
func (r Release) Platform() string { return r.OS + "/" + r.Arch }

// message is what a signature covers: a fixed prefix, so that no other
// signed thing of ours can pass for a release, and each field on a line.
func (r Release) message() []byte {
	var b strings.Builder
	b.WriteString("aip-agent release v1\n")
	for _, kv := range [][2]string{{"version", r.Version}, {"os", r.OS}, {"arch", r.Arch}, {"sha256", r.SHA256}, {"size", strconv.FormatInt(r.Size, 10)}} {
		b.WriteString(kv[0] + "=" + kv[1] + "\n")
	}
	return []byte(b.String())
}

// Sign returns r signed with priv.
func Sign(r Release, priv ed25519.PrivateKey) Release {
	r.KeyID = signature.KeyID(priv.Public().(ed25519.PublicKey))
	r.Signature = ed25519.Sign(priv, r.message())
	return r
}

// Verify checks r's signature against the trusted keys, and that r is
// well formed.
func (r Release) Verify(trusted []ed25519.PublicKey) error {
	if err := r.Check(); err != nil {
		return err
	}
	if err := r.CheckSigned(); err != nil {
		return err
	}
	for _, k := range trusted {
		if signature.KeyID(k) != r.KeyID {
			continue
		}
		if !ed25519.Verify(k, r.message(), r.Signature) {
			return ErrBadSignature
		}
		return nil
	}
	return fmt.Errorf("%w (key %s)", ErrUnknownKey, r.KeyID)
}

// SameDigest reports whether sum, a SHA-256, is r's.
func (r Release) SameDigest(sum []byte) bool { return hex.EncodeToString(sum) == r.SHA256 }
