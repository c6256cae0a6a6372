package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
)

// PutModule uploads a module for rollouts to name by its SHA-256.
func (c *Client) PutModule(ctx context.Context, wasm []byte) (ModuleResponse, error) {
	sum := sha256.Sum256(wasm)
	var out ModuleResponse
	err := c.send(ctx, 0, http.Header{"Content-Type": {"application/wasm"}}, http.MethodPut,
		"/api/modules/"+hex.EncodeToString(sum[:]), bytes.NewReader(wasm), &out)
	return out, err
}

// ApplyRollout makes spec, a rollout whose tools are digests of uploaded
// modules (rollout.Spec, as JSON), the rollout's newest revision.
func (c *Client) ApplyRollout(ctx context.Context, spec json.RawMessage) (RolloutApplied, error) {
	var out RolloutApplied
	err := c.Do(ctx, http.MethodPost, "/api/rollouts", spec, &out)
	return out, err
}

// Rollouts lists the rollouts, without their devices.
func (c *Client) Rollouts(ctx context.Context) ([]Rollout, error) {
	var out []Rollout
	err := c.Do(ctx, http.MethodGet, "/api/rollouts", nil, &out)
	return out, err
}

// Rollout is one rollout's status, with each device.
func (c *Client) Rollout(ctx context.Context, name string) (Rollout, error) {
	var out Rollout
	err := c.Do(ctx, http.MethodGet, "/api/rollouts/"+url.PathEscape(name), nil, &out)
	return out, err
}

// RolloutHistory is a rollout's revisions, newest first.
func (c *Client) RolloutHistory(ctx context.Context, name string) ([]RolloutRevision, error) {
	var out []RolloutRevision
	err := c.Do(ctx, http.MethodGet, "/api/rollouts/"+url.PathEscape(name)+"/history", nil, &out)
	return out, err
}

// ControlRollout pauses, resumes or rolls back a rollout: action is
// "pause", "resume" or "rollback".
func (c *Client) ControlRollout(ctx context.Context, name, action string) (Rollout, error) {
	var out Rollout
	err := c.Do(ctx, http.MethodPost, "/api/rollouts/"+url.PathEscape(name)+"/"+action, nil, &out)
	return out, err
}

// Label changes a device's labels.
func (c *Client) Label(ctx context.Context, id string, req LabelRequest) (map[string]any, error) {
	var out map[string]any
	err := c.Do(ctx, http.MethodPatch, "/api/devices/"+url.PathEscape(id)+"/labels", req, &out)
	return out, err
}

// PublishRelease uploads body, an agent binary of r.Size bytes whose
// SHA-256 is r.SHA256, as the release r describes, signed
// (agentrelease.Sign). body is streamed: it may be an open file. The
// call may take as long as the upload does; a server that answers
// neither it nor its health checks for ServerSilence ends it.
func (c *Client) PublishRelease(ctx context.Context, r agentrelease.Release, body io.Reader) (ReleasePublished, error) {
	q := url.Values{"version": {r.Version}, "os": {r.OS}, "arch": {r.Arch}, "size": {strconv.FormatInt(r.Size, 10)},
		"key_id": {r.KeyID}, "signature": {base64.RawURLEncoding.EncodeToString(r.Signature)}}
	var out ReleasePublished
	err := c.send(ctx, uploadTime(r.Size), http.Header{"Content-Type": {"application/octet-stream"}}, http.MethodPut,
		"/api/releases/"+url.PathEscape(r.SHA256)+"?"+q.Encode(), body, &out)
	return out, err
}

// uploadTime is how long an upload of size bytes may take: at 256 KiB/s,
// a slow uplink's, and at least a minute.
func uploadTime(size int64) time.Duration {
	return max(time.Minute, time.Duration(size/(256<<10))*time.Second)
}

// Releases lists the agent releases the server keeps, newest first.
func (c *Client) Releases(ctx context.Context) ([]Release, error) {
	var out []Release
	err := c.Do(ctx, http.MethodGet, "/api/releases", nil, &out)
	return out, err
}
