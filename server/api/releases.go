package api

import "time"

// ActionReleasePublish is the audit action of an agent release
// published (PUT /api/releases/{sha256}).
const ActionReleasePublish = "release.publish"

// Release is an agent release the server keeps: a build of aip-agent for
// one OS and architecture, by its SHA-256 and size, under a version,
// signed with a release key. The signature covers the version, OS,
// architecture, digest and size; devices verify it against the release
// keys they trust, the server does not.
type Release struct {
	Version string `json:"version"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
	// KeyID names the key that signed it; Signature is the ed25519
	// signature (base64 in JSON).
	KeyID     string `json:"key_id"`
	Signature []byte `json:"signature"`
	// PublishedAt and PublishedBy say when and by which identity it was
	// published.
	PublishedAt time.Time `json:"published_at"`
	PublishedBy string    `json:"published_by"`
}

// ReleasePublished is the answer to PUT /api/releases/{sha256}: the
// release kept.
type ReleasePublished struct {
	Release
	// Unchanged is set when the same release was kept already: nothing
	// changed.
	Unchanged bool `json:"unchanged,omitempty"`
}
