package api

import (
	"time"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
)

// ActionReleasePublish is the audit action of an agent release
// published (PUT /api/releases/{sha256}).
const ActionReleasePublish = "release.publish"

// Release is an agent release the server keeps: a build of aip-agent for
// one OS and architecture, by its SHA-256 and size, under a version,
// signed with a release key (agentrelease.Release, whose signature
// devices verify against the release keys they trust; the server does
// not), with when and by which identity it was published.
type Release struct {
	agentrelease.Release
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
