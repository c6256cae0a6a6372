package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// releaseHandlers serve the agent releases: binaries of aip-agent the
// server keeps, signed, for rollouts to bring devices to.
type releaseHandlers struct {
	log   *slog.Logger
	store *store.Store
}

// publish is PUT /api/releases/{sha256}: the body is an agent binary,
// the query its release's fields. The server checks what it can, the
// fields, the digest and the size, and that the release is signed; the
// devices check the signature against the release keys they trust.
// The body is read once, into one buffer of the release's size, after
// the size is held to agentrelease.MaxSize.
func (h *releaseHandlers) publish(w http.ResponseWriter, r *http.Request) {
	rel, code, err := releaseOf(r)
	if err != nil {
		// Refused unread: the connection closes after the answer, rather
		// than the server reading what is left of the body first.
		w.Header().Set("Connection", "close")
		writeError(w, code, err.Error())
		return
	}
	body, err := readRelease(w, r, rel)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	who := identity.CallerFrom(r)
	var created bool
	err = h.store.Write(r.Context(), func(tx *store.Tx) (err error) {
		if created, err = tx.Rollouts().PutRelease(store.Release{Release: rel, By: who.Name}, body); err != nil || !created {
			return err
		}
		return tx.Audit().Append(who.Audit(api.ActionReleasePublish, "", map[string]any{"version": rel.Version, "os": rel.OS,
			"arch": rel.Arch, "sha256": rel.SHA256, "size": rel.Size, "key_id": rel.KeyID}))
	})
	switch {
	case errors.Is(err, store.ErrReleaseConflict):
		writeError(w, http.StatusConflict, err.Error())
		return
	case err != nil:
		h.log.Error("release not kept", "version", rel.Version, "platform", rel.Platform(), "sha256", rel.SHA256, "err", err)
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	h.answerPublished(w, r, rel, created)
}

// answerPublished answers 201 with the release kept, or 200 if it was
// kept already.
func (h *releaseHandlers) answerPublished(w http.ResponseWriter, r *http.Request, rel agentrelease.Release, created bool) {
	kept, err := h.store.Rollouts().Release(r.Context(), rel.Version, rel.OS, rel.Arch)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
		h.log.Info("agent release published", "version", rel.Version, "platform", rel.Platform(), "sha256", rel.SHA256,
			"size", rel.Size, "key_id", rel.KeyID, "by", kept.By)
	}
	writeJSON(w, code, api.ReleasePublished{Release: apiRelease(kept), Unchanged: !created})
}

// list is GET /api/releases: every release kept, newest first.
func (h *releaseHandlers) list(w http.ResponseWriter, r *http.Request) {
	kept, err := h.store.Rollouts().Releases(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	out := make([]api.Release, len(kept))
	for i, k := range kept {
		out[i] = apiRelease(k)
	}
	writeJSON(w, http.StatusOK, out)
}

func apiRelease(k store.Release) api.Release {
	return api.Release{Release: k.Release, PublishedAt: k.CreatedAt, PublishedBy: k.By}
}

// releaseOf is the release a publish describes, by its path and query,
// or the status and error that refuse it: 413 for a size past
// agentrelease.MaxSize, 400 for anything else malformed or unsigned.
// The size is the query's, else the request's Content-Length.
func releaseOf(r *http.Request) (agentrelease.Release, int, error) {
	q := r.URL.Query()
	rel := agentrelease.Release{Version: q.Get("version"), OS: q.Get("os"), Arch: q.Get("arch"), SHA256: r.PathValue("sha256"),
		Size: r.ContentLength, KeyID: q.Get("key_id")}
	if s := q.Get("size"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return rel, http.StatusBadRequest, fmt.Errorf("size %q: want a number of bytes", s)
		}
		rel.Size = n
	}
	switch {
	case rel.Size < 0:
		return rel, http.StatusBadRequest, errors.New("size: give it in the query (size=BYTES) or send a Content-Length")
	case rel.Size > agentrelease.MaxSize || r.ContentLength > agentrelease.MaxSize:
		return rel, http.StatusRequestEntityTooLarge, fmt.Errorf("a release is at most %d bytes; this one is %d", agentrelease.MaxSize, max(rel.Size, r.ContentLength))
	case r.ContentLength >= 0 && r.ContentLength != rel.Size:
		return rel, http.StatusBadRequest, fmt.Errorf("the body is %d bytes (its Content-Length), the size %d", r.ContentLength, rel.Size)
	}
	if err := rel.Check(); err != nil {
		return rel, http.StatusBadRequest, err
	}
	sig, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(q.Get("signature"), "="))
	if err != nil {
		return rel, http.StatusBadRequest, fmt.Errorf("signature: want base64url: %w", err)
	}
	rel.Signature = sig
	if err := rel.CheckSigned(); errors.Is(err, agentrelease.ErrUnsigned) {
		return rel, http.StatusBadRequest, fmt.Errorf("%w: devices refuse unsigned releases; sign it with a release key (aipctl agent publish --key)", err)
	} else if err != nil {
		return rel, http.StatusBadRequest, err
	}
	return rel, 0, nil
}

// readRelease reads the body of rel's publish, which must be rel.Size
// bytes whose SHA-256 is rel.SHA256; it reads no byte past rel.Size+1.
func readRelease(w http.ResponseWriter, r *http.Request, rel agentrelease.Release) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, rel.Size)
	buf := make([]byte, rel.Size)
	n, err := io.ReadFull(body, buf)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("the body is %d bytes, the size %d", n, rel.Size)
	}
	if err != nil {
		return nil, fmt.Errorf("request body: %w", err)
	}
	var tooBig *http.MaxBytesError
	if _, err := body.Read(make([]byte, 1)); errors.As(err, &tooBig) {
		return nil, fmt.Errorf("the body is longer than the size, %d bytes", rel.Size)
	}
	if sum := sha256.Sum256(buf); !rel.SameDigest(sum[:]) {
		return nil, fmt.Errorf("the body's SHA-256 is %x, the path's %s", sum, rel.SHA256)
	}
	return buf, nil
}
