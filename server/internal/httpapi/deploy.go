package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
)

// timeoutQuery names a deploy's timeout in errors.
const timeoutQuery = `query "timeout"`

// frameHeadroom is what a COMMAND frame needs besides the module itself.
const frameHeadroom = 64 << 10

// deployTool is POST /api/devices/{id}/tools?namespace=NS&timeout=D: the
// body is a tool module, which the device's install_tool meta tool
// verifies, keeps and loads. The answer is the command's response, with
// the installed tool's description as its Result.
func (h *deviceHandlers) deployTool(w http.ResponseWriter, r *http.Request) {
	d, ok := h.enrolled(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	// Checked before the body is read, and again by the front door: a bad
	// timeout is the answer even to a module too big.
	if _, err := tasks.CommandTimeout(timeoutQuery, q.Get("timeout")); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	wasm, err := io.ReadAll(http.MaxBytesReader(w, r.Body, protocol.MaxModuleBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("module is larger than %d bytes", protocol.MaxModuleBytes))
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "request body: "+err.Error())
		return
	}
	params, err := protocol.InstallToolParams(wasm, q.Get("namespace"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if n := len(params["module"].(string)); n > protocol.DefaultMaxFrameBytes-frameHeadroom {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("module is %d bytes once compressed and encoded; a device link carries frames of at most %d", n, protocol.DefaultMaxFrameBytes))
		return
	}
	if !h.mayDeployOver(w, r, d.ID, wasm, params) {
		return
	}
	action := protocol.Command{ToolName: protocol.InstallToolName, ToolType: protocol.ToolAction, Parameters: params}
	resp, err := h.tasks.RunCommand(r.Context(), tasks.CommandTask{
		Asker: tasks.Asker{Who: identity.CallerFrom(r), Kind: api.RequesterOperator}, Device: d.ID, Actions: []protocol.Command{action},
		Timeout: q.Get("timeout"), TimeoutArg: timeoutQuery,
	})
	if err != nil {
		h.keys.writeTaskError(w, r, nil, err)
		return
	}
	log := h.log.With("device", d.ID, "session_id", resp.SessionID, "response_id", resp.ResponseID,
		"call_id", protocol.JoinCallIDs(protocol.ResultCallIDs(resp.Results)), "bytes", len(wasm))
	if reason := resp.FirstError(); reason != "" {
		log.Warn("tool deploy failed", "err", reason)
	} else {
		log.Info("tool deployed")
	}
	writeJSON(w, http.StatusOK, resp)
}

// mayDeployOver refuses a deploy of a tool that a rollout owns on device
// id, naming the rollout, unless the request says force=true: then the
// device keeps the module in place of the rollout's (params' force),
// and the rollout's status shows it as drift.
func (h *deviceHandlers) mayDeployOver(w http.ResponseWriter, r *http.Request, id string, wasm []byte, params map[string]any) bool {
	mod, err := manifest.FromWasm(wasm)
	if err != nil {
		return true // the device refuses it, saying why
	}
	owner, rev, err := h.rollouts.OwnerOf(r.Context(), id, mod.Manifest.Name)
	switch {
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return false
	case owner == "":
		return true
	case r.URL.Query().Get("force") != "true":
		writeError(w, http.StatusConflict, fmt.Sprintf("tool %q on device %s belongs to rollout %q (revision %d): change the rollout, or deploy with force=true (aipctl tool deploy --force), which its status then shows as drift",
			mod.Manifest.Name, id, owner, rev))
		return false
	}
	params["force"] = true
	h.log.Warn("tool deployed over a rollout's", "device", id, "tool", mod.Manifest.Name, "rollout", owner, "by", identity.CallerFrom(r).Name)
	return true
}
