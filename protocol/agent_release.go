package protocol

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
)

// The meta tools that update the agent itself (server/RATIONALE.md,
// "Agent updates"). A rollout asks for them; admission refuses them from
// anyone else.
const (
	// StageReleaseName takes a release's compressed stream one chunk at a
	// time, resuming where the device's copy ends.
	StageReleaseName = "stage_release"
	// ApplyReleaseName starts a staged release on trial: the agent ends,
	// and its supervisor starts the release.
	ApplyReleaseName = "apply_release"
	// EndTrialName commits the release on trial, or rejects it.
	EndTrialName = "end_trial"
	// RevertReleaseName takes back the release the agent runs, when the
	// rollout that brought it is rolled back: the agent it replaced
	// comes back.
	RevertReleaseName = "revert_release"
	// AgentUpdateMetadataKey is the custom_metadata entry where a device
	// reports which release it runs, whether on trial, and the last trial
	// that failed (AgentUpdateReport).
	AgentUpdateMetadataKey = "agent_update"
)

// ReleaseChunkBytes is how much of a release's compressed stream one
// stage_release carries. A chunk and its command fit a link whose frame
// bound is as low as 1 MiB (4 MiB by default) and, in a cluster, the
// message that carries the command to the node holding the link: JSON,
// which writes the chunk as base64, within NATS's default bound of 1 MiB.
const ReleaseChunkBytes = 512 << 10

// ReleaseChunk is one stage_release: the release, where the chunk starts
// in its compressed stream (zstd) of Total bytes, and the chunk with its
// SHA-256. No Data is a probe: the device answers how much it holds.
type ReleaseChunk struct {
	Release agentrelease.Release
	Offset  int64
	Total   int64
	Data    []byte
}

// StageReleaseParams builds stage_release's parameters. Data goes as a
// byte string, which CBOR carries as is and JSON as base64.
func StageReleaseParams(c ReleaseChunk) map[string]any {
	p := map[string]any{
		"release": releaseMap(c.Release),
		"sha256":  c.Release.SHA256,
		"offset":  c.Offset,
		"total":   c.Total,
	}
	if len(c.Data) > 0 {
		sum := sha256.Sum256(c.Data)
		p["data"], p["chunk_sha256"] = c.Data, hex.EncodeToString(sum[:])
	}
	return p
}

func releaseMap(r agentrelease.Release) map[string]any {
	return map[string]any{"version": r.Version, "os": r.OS, "arch": r.Arch, "sha256": r.SHA256,
		"size": r.Size, "key_id": r.KeyID, "signature": base64.StdEncoding.EncodeToString(r.Signature)}
}

// ReleaseChunkFrom reads stage_release's parameters, checking the chunk
// against its SHA-256.
func ReleaseChunkFrom(params map[string]any) (ReleaseChunk, error) {
	var c ReleaseChunk
	r, err := ReleaseFrom(params["release"])
	if err != nil {
		return c, err
	}
	off, ok1 := wholeNumber(params["offset"])
	total, ok2 := wholeNumber(params["total"])
	if !ok1 || !ok2 || off < 0 || total <= 0 || off > total || int64(total) > agentrelease.MaxSize {
		return c, fmt.Errorf(`parameters "offset" and "total": %v and %v are not a place in a stream of at most %d bytes`, params["offset"], params["total"], agentrelease.MaxSize)
	}
	c = ReleaseChunk{Release: r, Offset: int64(off), Total: int64(total)}
	if params["data"] == nil {
		return c, nil
	}
	if c.Data, err = bytesParam(params["data"]); err != nil {
		return ReleaseChunk{}, err
	}
	sum := sha256.Sum256(c.Data)
	if want, _ := params["chunk_sha256"].(string); want != hex.EncodeToString(sum[:]) {
		return ReleaseChunk{}, fmt.Errorf("chunk at %d: SHA-256 %s, not the %q it was sent with: it was damaged on the way", c.Offset, hex.EncodeToString(sum[:]), want)
	}
	if c.Offset+int64(len(c.Data)) > c.Total {
		return ReleaseChunk{}, fmt.Errorf("chunk at %d of %d bytes runs past the stream's %d", c.Offset, len(c.Data), c.Total)
	}
	return c, nil
}

// bytesParam reads a byte string as CBOR decodes it, or as base64 text
// as JSON carries it.
func bytesParam(v any) ([]byte, error) {
	switch d := v.(type) {
	case []byte:
		return d, nil
	case string:
		b, err := base64.StdEncoding.DecodeString(d)
		if err != nil {
			return nil, fmt.Errorf(`parameter "data": not base64: %w`, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf(`parameter "data": %T is not bytes`, v)
}

// ReleaseFrom reads a release as releaseMap writes it, from either wire.
func ReleaseFrom(v any) (agentrelease.Release, error) {
	var w struct {
		agentrelease.Release
		Signature string `json:"signature"`
	}
	if err := decodeVia(v, &w); err != nil {
		return agentrelease.Release{}, fmt.Errorf(`parameter "release": %w`, err)
	}
	r := w.Release
	sig, err := base64.StdEncoding.DecodeString(w.Signature)
	if err != nil {
		return agentrelease.Release{}, fmt.Errorf(`parameter "release": signature: %w`, err)
	}
	r.Signature = sig
	if err := r.Check(); err != nil {
		return agentrelease.Release{}, fmt.Errorf(`parameter "release": %w`, err)
	}
	return r, nil
}

// StageReleaseSchema is the input schema of stage_release.
var StageReleaseSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"release":      map[string]any{"type": "object", "description": "the release: version, os, arch, sha256, size, key_id, signature (base64)"},
		"sha256":       map[string]any{"type": "string", "description": "the release binary's SHA-256"},
		"offset":       map[string]any{"type": "integer", "minimum": 0, "description": "where data starts in the release's zstd stream"},
		"total":        map[string]any{"type": "integer", "minimum": 1, "description": "the zstd stream's size"},
		"data":         map[string]any{"description": "the chunk (bytes; base64 over JSON); none asks how much the device holds"},
		"chunk_sha256": map[string]any{"type": "string"},
	},
	"required": []any{"release", "sha256", "offset", "total"},
}

// ApplyReleaseParams builds apply_release's parameters: the release to
// start on trial, the rollout and revision asking, and the bound within
// which it must be committed.
func ApplyReleaseParams(r agentrelease.Release, rollout string, revision int, trial time.Duration) map[string]any {
	return map[string]any{"release": releaseMap(r), "sha256": r.SHA256, "rollout": rollout, "revision": int64(revision),
		"trial_seconds": int64(trial / time.Second)}
}

// ApplyRelease is apply_release's parameters, read.
type ApplyRelease struct {
	Release  agentrelease.Release
	Rollout  string
	Revision int
	Trial    time.Duration
}

// ApplyReleaseFrom reads apply_release's parameters.
func ApplyReleaseFrom(params map[string]any) (ApplyRelease, error) {
	r, err := ReleaseFrom(params["release"])
	if err != nil {
		return ApplyRelease{}, err
	}
	secs, ok := wholeNumber(params["trial_seconds"])
	if !ok || secs < 1 || secs > 24*3600 {
		return ApplyRelease{}, fmt.Errorf(`parameter "trial_seconds": %v is not a whole number of seconds from 1 to a day`, params["trial_seconds"])
	}
	rollout, _ := params["rollout"].(string)
	rev, _ := wholeNumber(params["revision"])
	return ApplyRelease{Release: r, Rollout: rollout, Revision: rev, Trial: time.Duration(secs) * time.Second}, nil
}

// ApplyReleaseSchema is the input schema of apply_release.
var ApplyReleaseSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"release":       StageReleaseSchema["properties"].(map[string]any)["release"],
		"sha256":        StageReleaseSchema["properties"].(map[string]any)["sha256"],
		"rollout":       map[string]any{"type": "string"},
		"revision":      map[string]any{"type": "integer", "minimum": 0},
		"trial_seconds": map[string]any{"type": "integer", "minimum": 1, "maximum": 86400},
	},
	"required": []any{"release", "sha256", "trial_seconds"},
}

// EndTrialParams builds end_trial's parameters: commit the release on
// trial, sha, or reject it with reason.
func EndTrialParams(sha string, commit bool, reason string) map[string]any {
	return map[string]any{"sha256": sha, "commit": commit, "reason": reason}
}

// EndTrialSchema is the input schema of end_trial.
var EndTrialSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"sha256": StageReleaseSchema["properties"].(map[string]any)["sha256"],
		"commit": map[string]any{"type": "boolean", "description": "true commits the release on trial; false rejects it, and the previous agent comes back"},
		"reason": map[string]any{"type": "string", "description": "why it is rejected"},
	},
	"required": []any{"sha256", "commit"},
}

// RevertReleaseSchema is the input schema of revert_release.
var RevertReleaseSchema = map[string]any{
	"type":       "object",
	"properties": map[string]any{"sha256": StageReleaseSchema["properties"].(map[string]any)["sha256"]},
	"required":   []any{"sha256"},
}

// AgentUpdateReport is what a device reports of its agent's updates at
// registration: the release it runs (empty: the flashed binary), whether
// on trial, and the last release whose trial failed.
type AgentUpdateReport struct {
	Running string        `json:"running"`
	Trial   bool          `json:"trial,omitempty"`
	Failed  *TrialFailure `json:"failed,omitempty"`
}

// TrialFailure is a release whose trial failed, why and when, and the
// rollout and revision that applied it; the previous agent came back.
type TrialFailure struct {
	Version  string    `json:"version"`
	SHA256   string    `json:"sha256"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
	Rollout  string    `json:"rollout,omitempty"`
	Revision int       `json:"revision,omitempty"`
}

// AddAgentUpdateMetadata puts r into custom, as plain values that either
// wire carries.
func AddAgentUpdateMetadata(custom map[string]any, r AgentUpdateReport) {
	m := map[string]any{"running": r.Running, "trial": r.Trial}
	if f := r.Failed; f != nil {
		m["failed"] = map[string]any{"version": f.Version, "sha256": f.SHA256, "reason": f.Reason, "at": f.At.UTC().Format(time.RFC3339Nano),
			"rollout": f.Rollout, "revision": int64(f.Revision)}
	}
	custom[AgentUpdateMetadataKey] = m
}

// AgentUpdateFromMetadata reads what AddAgentUpdateMetadata put into
// custom; ok is false if the device reports none (an agent that does not
// update itself).
func AgentUpdateFromMetadata(custom map[string]any) (r AgentUpdateReport, ok bool) {
	v, found := custom[AgentUpdateMetadataKey]
	if !found || decodeVia(v, &r) != nil {
		return AgentUpdateReport{}, false
	}
	return r, true
}
