package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/rollouts"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/rollout"
)

// rolloutHandlers serve the rollouts, the modules they name, and the
// labels that decide which devices they reach.
type rolloutHandlers struct {
	log      *slog.Logger
	store    *store.Store
	rollouts *rollouts.Engine
	devices  *deviceHandlers
	// relabelled is told of a device whose labels changed here.
	relabelled func(id string)
}

// putModule is PUT /api/modules/{sha256}: the body is a module the
// server keeps by its digest, for rollouts to name.
func (h *rolloutHandlers) putModule(w http.ResponseWriter, r *http.Request) {
	wasm, err := io.ReadAll(http.MaxBytesReader(w, r.Body, protocol.MaxModuleBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("module is larger than %d bytes", protocol.MaxModuleBytes))
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "request body: "+err.Error())
		return
	}
	m, err := h.rollouts.PutModule(r.Context(), identity.CallerFrom(r), r.PathValue("sha256"), wasm)
	h.reply(w, r, m, err)
}

// apply is POST /api/rollouts: the body is a rollout spec whose tools
// are digests of kept modules. A new revision answers 201, the desired
// revision's own spec 200.
func (h *rolloutHandlers) apply(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, rollout.MaxBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("a rollout is at most %d bytes", rollout.MaxBytes))
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "request body: "+err.Error())
		return
	}
	spec, err := rollout.ParseDigests(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	out, err := h.rollouts.Apply(r.Context(), identity.CallerFrom(r), spec)
	if err != nil {
		h.writeRolloutError(w, r, err)
		return
	}
	code := http.StatusCreated
	if out.Unchanged {
		code = http.StatusOK
	}
	writeJSON(w, code, out)
}

// list is GET /api/rollouts.
func (h *rolloutHandlers) list(w http.ResponseWriter, r *http.Request) {
	out, err := h.rollouts.List(r.Context(), identity.CallerFrom(r))
	h.reply(w, r, out, err)
}

// status is GET /api/rollouts/{name}.
func (h *rolloutHandlers) status(w http.ResponseWriter, r *http.Request) {
	h.answer(w, r, h.rollouts.Status)
}

// history is GET /api/rollouts/{name}/history.
func (h *rolloutHandlers) history(w http.ResponseWriter, r *http.Request) {
	out, err := h.rollouts.History(r.Context(), r.PathValue("name"))
	h.reply(w, r, out, err)
}

// pause, resume and rollback are POST /api/rollouts/{name}/pause, …
func (h *rolloutHandlers) pause(w http.ResponseWriter, r *http.Request) {
	h.answer(w, r, h.rollouts.Pause)
}

func (h *rolloutHandlers) resume(w http.ResponseWriter, r *http.Request) {
	h.answer(w, r, h.rollouts.Resume)
}

func (h *rolloutHandlers) rollback(w http.ResponseWriter, r *http.Request) {
	h.answer(w, r, h.rollouts.Rollback)
}

// answer answers with the rollout of the path that do gives.
func (h *rolloutHandlers) answer(w http.ResponseWriter, r *http.Request, do func(context.Context, *identity.Caller, string) (api.Rollout, error)) {
	out, err := do(r.Context(), identity.CallerFrom(r), r.PathValue("name"))
	h.reply(w, r, out, err)
}

// reply answers out, or err.
func (h *rolloutHandlers) reply(w http.ResponseWriter, r *http.Request, out any, err error) {
	if err != nil {
		h.writeRolloutError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// writeRolloutError answers err of the rollouts engine.
func (h *rolloutHandlers) writeRolloutError(w http.ResponseWriter, r *http.Request, err error) {
	var invalid *rollouts.InvalidError
	var conflict *rollouts.ConflictError
	var forbidden *identity.Forbidden
	switch {
	case errors.As(err, &invalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.As(err, &conflict):
		writeError(w, http.StatusConflict, err.Error())
	case errors.As(err, &forbidden):
		forbid(h.log, w, r, err)
	case errors.Is(err, rollouts.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	default:
		h.log.Error("rollout request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusServiceUnavailable, err.Error())
	}
}

// label is PATCH /api/devices/{id}/labels: it sets and removes labels of
// an enrolled device, audited; the rollouts that want it, or no longer
// do, reconcile at once. Labels that would have two rollouts put the
// same tool on the device are refused.
func (h *rolloutHandlers) label(w http.ResponseWriter, r *http.Request) {
	var req api.LabelRequest
	if !readJSON(w, r, &req) {
		return
	}
	d, ok := h.devices.enrolled(w, r)
	if !ok {
		return
	}
	labels := maps.Clone(d.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, req.Set)
	for _, k := range req.Remove {
		delete(labels, k)
	}
	if err := checkLabels(labels); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	who := identity.CallerFrom(r)
	if !who.Scope.Device(labels) {
		forbid(h.log, w, r, fmt.Errorf("identity %q may not give device %s labels its scope (%s) does not pick", who.Name, d.ID, who.Scope.Devices))
		return
	}
	if err := h.rollouts.CheckLabels(r.Context(), d.ID, labels); err != nil {
		h.writeRolloutError(w, r, err)
		return
	}
	err := h.store.Write(r.Context(), func(tx *store.Tx) error {
		if err := tx.Devices().SetLabels(d.ID, labels); err != nil {
			return err
		}
		return tx.Audit().Append(who.Audit(api.ActionDeviceLabel, d.ID, map[string]any{"labels": labels, "was": d.Labels}))
	})
	if !deviceFound(w, d.ID, err) {
		return
	}
	h.relabelled(d.ID)
	h.log.Info("device relabelled", "device", d.ID, "labels", labels, "by", who.Name)
	writeJSON(w, http.StatusOK, map[string]any{"id": d.ID, "labels": labels})
}

// checkLabels holds labels to the selectors' rules for keys and values.
func checkLabels(labels map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if _, err := access.ParseSelector(k + "=" + labels[k]); err != nil {
			return fmt.Errorf("label %s: %w", k, err)
		}
	}
	return nil
}
