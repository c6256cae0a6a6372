package rollouts

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// ReleaseTool is the tool name of a release's binary in the modules
// table: the binary is kept by digest beside the modules rollouts put on
// devices.
const ReleaseTool = "aip-agent"

// Release is an agent release as kept: its description, signed, with
// when and by whom it was published.
type Release struct {
	agentrelease.Release
	CreatedAt time.Time
	// By is the identity that published it.
	By string
}

// ErrReleaseConflict: a release of the same version, OS and
// architecture is kept already, with another binary or signature. The
// error that wraps it is a *ReleaseConflictError naming the kept one.
var ErrReleaseConflict = errors.New("another release of this version, OS and architecture is kept")

// ReleaseConflictError is a release refused because Kept, of the same
// version, OS and architecture, differs from it.
type ReleaseConflictError struct{ Kept Release }

func (e *ReleaseConflictError) Error() string {
	return fmt.Sprintf("release %s for %s: kept already as %s, signed by key %s", e.Kept.Version, e.Kept.Platform(), e.Kept.SHA256, e.Kept.KeyID)
}

// Is makes the error ErrReleaseConflict for errors.Is.
func (e *ReleaseConflictError) Is(target error) bool { return target == ErrReleaseConflict }

// PutRelease keeps r, with body its binary kept as a module, and
// reports whether it is new: the same release again changes nothing, and
// one of the same version, OS and architecture that differs from the
// kept one fails with a *ReleaseConflictError.
func (w Writes) PutRelease(r Release, body []byte) (bool, error) {
	if err := w.PutModule(Module{SHA256: r.SHA256, Tool: ReleaseTool, Size: r.Size, Body: body}); err != nil {
		return false, err
	}
	res, err := w.t.Exec(`INSERT INTO releases (version, os, arch, sha256, size, key_id, signature, created_at, created_by)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (version, os, arch) DO NOTHING`,
		r.Version, r.OS, r.Arch, r.SHA256, r.Size, r.KeyID, base64.StdEncoding.EncodeToString(r.Signature), sqlrow.Now(), r.By)
	if err != nil {
		return false, fmt.Errorf("store: keep release %s for %s: %w", r.Version, r.Platform(), err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, nil
	}
	kept, err := scanRelease(w.t.QueryRow(selectReleases+` WHERE version = ? AND os = ? AND arch = ?`, r.Version, r.OS, r.Arch))
	if err != nil {
		return false, fmt.Errorf("store: release %s for %s: read the kept one: %w", r.Version, r.Platform(), err)
	}
	if kept.SHA256 != r.SHA256 || kept.KeyID != r.KeyID || !bytes.Equal(kept.Signature, r.Signature) {
		return false, &ReleaseConflictError{Kept: kept}
	}
	return false, nil
}

const selectReleases = `SELECT version, os, arch, sha256, size, key_id, signature, created_at, created_by FROM releases`

func scanRelease(row sqlrow.Row) (Release, error) {
	var r Release
	var sig string
	var created sql.NullString
	if err := row.Scan(&r.Version, &r.OS, &r.Arch, &r.SHA256, &r.Size, &r.KeyID, &sig, &created, &r.By); err != nil {
		return r, err
	}
	r.CreatedAt = sqlrow.ParseTime(created)
	var err error
	if r.Signature, err = base64.StdEncoding.DecodeString(sig); err != nil {
		return r, fmt.Errorf("release %s for %s: signature: %w", r.Version, r.Platform(), err)
	}
	return r, nil
}

// Releases are the releases kept, newest first.
func (q Reads) Releases(ctx context.Context) ([]Release, error) {
	rows, err := q.r.ReadRows(ctx, selectReleases+` ORDER BY created_at DESC, version DESC, os, arch`)
	if err != nil {
		return nil, fmt.Errorf("store: releases: %w", err)
	}
	out, err := sqlrow.Collect(rows, scanRelease, []Release{})
	if err != nil {
		return nil, fmt.Errorf("store: releases: %w", err)
	}
	return out, nil
}

// Release is the release of version for os/arch, or ErrNotFound.
func (q Reads) Release(ctx context.Context, version, os, arch string) (Release, error) {
	r, err := scanRelease(q.r.ReadRow(ctx, selectReleases+` WHERE version = ? AND os = ? AND arch = ?`, version, os, arch))
	return r, sqlrow.Err(err, "release %s for %s/%s", version, os, arch)
}
