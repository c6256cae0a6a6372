package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// A scoped caller sees only the devices its selector picks and the tools
// its patterns allow: everything else answers as if it did not exist. A
// future surface (the MCP gateway) holds its callers to these functions,
// as the API does.

// deviceNotEnrolled is the 404 of a device that is not enrolled, or not
// in the caller's scope: the two read the same.
func deviceNotEnrolled(id string) string { return fmt.Sprintf("device %q is not enrolled", id) }

// noTask is the 404 of a task that does not exist, or is not in the
// caller's scope.
func noTask(id string) string { return fmt.Sprintf("no task %q", id) }

// deviceInScope reports whether device id is in c's scope: false if it is
// not enrolled and c's scope picks devices.
func (s *Server) deviceInScope(ctx context.Context, c *identity.Caller, id string) (bool, error) {
	if len(c.Scope.Devices) == 0 {
		return true, nil
	}
	d, err := s.devices.get(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return c.Scope.Device(d.Labels), nil
}

// onlineInScope reports whether device id is online, here or, in a
// cluster, on another live node, and in c's scope. A store that fails to
// say counts as out of scope, and is logged.
func (s *Server) onlineInScope(ctx context.Context, c *identity.Caller, id string) bool {
	if s.reg.Device(id) == nil && !s.leases.LinkedElsewhere(id) && !s.leases.HeldElsewhere(id) {
		return false
	}
	in, err := s.deviceInScope(ctx, c, id)
	if err != nil {
		s.log.Warn("device scope not known: taken as out of scope", "device", id, "identity", c.Name, "err", err)
	}
	return in
}

// devicesInScope lists the enrolled devices in c's scope, or nil if its
// scope picks every device.
func (s *Server) devicesInScope(ctx context.Context, c *identity.Caller) ([]string, error) {
	if len(c.Scope.Devices) == 0 {
		return nil, nil
	}
	return s.store.DevicesMatching(ctx, c.Scope.Devices, 0)
}

// taskInScope reports whether task id is in c's scope: a task on a device
// in scope, or a fleet whose selector implies the scope's (every device
// it could run on is in scope). False for a task that does not exist.
func (s *Server) taskInScope(ctx context.Context, c *identity.Caller, id string) (bool, error) {
	if len(c.Scope.Devices) == 0 {
		return true, nil
	}
	if sess := s.tasks.Live(id); sess != nil {
		return s.sessionInScope(ctx, c, sess.DeviceID, sess.Selector())
	}
	row, err := s.store.Session(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return s.rowInScope(ctx, c, row)
}

// rowInScope is taskInScope for a task as the store has it.
func (s *Server) rowInScope(ctx context.Context, c *identity.Caller, row store.Session) (bool, error) {
	if len(c.Scope.Devices) == 0 {
		return true, nil
	}
	var sel access.Selector
	if row.Selector != "" {
		if err := json.Unmarshal([]byte(row.Selector), &sel); err != nil {
			return false, fmt.Errorf("task %q: selector: %w", row.ID, err)
		}
	}
	return s.sessionInScope(ctx, c, row.DeviceID, sel)
}

// sessionInScope is taskInScope for a task on deviceID, or a fleet
// (deviceID empty) that ran with sel.
func (s *Server) sessionInScope(ctx context.Context, c *identity.Caller, deviceID string, sel access.Selector) (bool, error) {
	if deviceID != "" {
		return s.deviceInScope(ctx, c, deviceID)
	}
	return sel.Implies(c.Scope.Devices), nil
}

// toolsInScope is tools without those scope does not allow.
func toolsInScope(tools []protocol.MCPToolInfo, scope access.Scope) []protocol.MCPToolInfo {
	if len(scope.Tools) == 0 {
		return tools
	}
	out := []protocol.MCPToolInfo{}
	for _, t := range tools {
		if scope.Tool(string(t.ToolType), t.ToolName) {
			out = append(out, t)
		}
	}
	return out
}

// infoInScope is info with only the tools scope allows.
func infoInScope(info *protocol.SystemInfo, scope access.Scope) *protocol.SystemInfo {
	if info == nil || len(scope.Tools) == 0 {
		return info
	}
	in := *info
	in.Tools = toolsInScope(info.Tools, scope)
	return &in
}

// clientsInScope lists the online clients c may see: the devices in its
// scope (linked here or, in a cluster, to another node), and the
// constellations here that drive one.
func (s *Server) clientsInScope(ctx context.Context, c *identity.Caller) ([]string, error) {
	ids := s.reg.IDs()
	if elsewhere := s.leases.DevicesElsewhere(); len(elsewhere) > 0 {
		ids = slices.Compact(slices.Sorted(slices.Values(append(ids, elsewhere...))))
	}
	devices, err := s.devicesInScope(ctx, c)
	if err != nil || devices == nil {
		return ids, err
	}
	in := map[string]bool{}
	for _, id := range devices {
		in[id] = true
	}
	out := []string{}
	for _, id := range ids {
		cl := s.reg.Get(id)
		if cl == nil && in[id] || cl != nil && (cl.IsDevice() && in[id] || !cl.IsDevice() && in[cl.Target]) {
			out = append(out, id)
		}
	}
	return out, nil
}
