// Package inscope holds every surface to what a caller's scope lets it
// see: a scoped caller sees only the devices its selector picks and the
// tools its patterns allow, and everything else answers as if it did not
// exist; of a task in scope, it sees what tools outside its patterns were
// given and returned only as withheld (Sight). It keeps, for that and for the command path, the enrolled
// devices and their labels in memory (Enrolled). See
// internal/identity/RATIONALE.md, "Scopes on every surface".
package inscope

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
)

// Checker answers whether what a caller asks of is in its scope.
type Checker struct {
	store   *store.Store
	devices *Enrolled
	disp    *dispatch.Dispatcher
	tasks   *tasks.FrontDoor
	log     *slog.Logger
}

// NewChecker checks scopes against the devices st enrolls (through
// devices, its cache), those disp reaches, and the tasks the front door
// runs.
func NewChecker(st *store.Store, devices *Enrolled, disp *dispatch.Dispatcher, front *tasks.FrontDoor, log *slog.Logger) *Checker {
	return &Checker{store: st, devices: devices, disp: disp, tasks: front, log: log}
}

// DeviceNotEnrolled is the 404 of a device that is not enrolled, or not
// in the caller's scope: the two read the same.
func DeviceNotEnrolled(id string) string { return fmt.Sprintf("device %q is not enrolled", id) }

// NoTask is the 404 of a task that does not exist, or is not in the
// caller's scope.
func NoTask(id string) string { return fmt.Sprintf("no task %q", id) }

// Device reports whether device id is in c's scope: false if it is
// not enrolled and c's scope picks devices.
func (k *Checker) Device(ctx context.Context, c *identity.Caller, id string) (bool, error) {
	if len(c.Scope.Devices) == 0 {
		return true, nil
	}
	d, err := k.devices.Get(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return c.Scope.Device(d.Labels), nil
}

// Online reports whether device id is online, here or, in a
// cluster, on another node (alive, or dead for less than the device
// grace: the device is between links then, and commands wait for it, as
// on the node whose link dropped), and in c's scope. A store that fails
// to say counts as out of scope, and is logged.
func (k *Checker) Online(ctx context.Context, c *identity.Caller, id string) bool {
	if k.disp.Registry().Device(id) == nil && !k.disp.Leases().LinkedElsewhere(id) && !k.disp.Leases().AwaitedElsewhere(id) {
		return false
	}
	in, err := k.Device(ctx, c, id)
	if err != nil {
		k.log.Warn("device scope not known: taken as out of scope", "device", id, "identity", c.Name, "err", err)
	}
	return in
}

// Devices lists the enrolled devices in c's scope, or nil if its
// scope picks every device.
func (k *Checker) Devices(ctx context.Context, c *identity.Caller) ([]string, error) {
	if len(c.Scope.Devices) == 0 {
		return nil, nil
	}
	return k.store.Devices().Matching(ctx, c.Scope.Devices, 0)
}

// Task reports whether task id is in c's scope: a task on a device
// in scope, or a fleet whose selector implies the scope's (every device
// it could run on is in scope). False for a task that does not exist.
func (k *Checker) Task(ctx context.Context, c *identity.Caller, id string) (bool, error) {
	if len(c.Scope.Devices) == 0 {
		return true, nil
	}
	if sess := k.tasks.Live(id); sess != nil {
		return k.session(ctx, c, sess.DeviceID, sess.Selector())
	}
	row, err := k.tasks.Task(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return k.Row(ctx, c, row)
}

// Row is Task for a task as the store has it.
func (k *Checker) Row(ctx context.Context, c *identity.Caller, row store.Session) (bool, error) {
	if len(c.Scope.Devices) == 0 {
		return true, nil
	}
	var sel access.Selector
	if row.Selector != "" {
		if err := json.Unmarshal([]byte(row.Selector), &sel); err != nil {
			return false, fmt.Errorf("task %q: selector: %w", row.ID, err)
		}
	}
	return k.session(ctx, c, row.DeviceID, sel)
}

// session is Task for a task on deviceID, or a fleet
// (deviceID empty) that ran with sel.
func (k *Checker) session(ctx context.Context, c *identity.Caller, deviceID string, sel access.Selector) (bool, error) {
	if deviceID != "" {
		return k.Device(ctx, c, deviceID)
	}
	return sel.Implies(c.Scope.Devices), nil
}

// Tools is tools without those scope does not allow.
func Tools(tools []protocol.MCPToolInfo, scope access.Scope) []protocol.MCPToolInfo {
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

// Info is info with only the tools scope allows.
func Info(info *protocol.SystemInfo, scope access.Scope) *protocol.SystemInfo {
	if info == nil || len(scope.Tools) == 0 {
		return info
	}
	in := *info
	in.Tools = Tools(info.Tools, scope)
	return &in
}

// Clients lists the online clients c may see: the devices in its
// scope (linked here or, in a cluster, to another node), and the
// constellations here that drive one.
func (k *Checker) Clients(ctx context.Context, c *identity.Caller) ([]string, error) {
	ids := k.disp.Registry().IDs()
	if elsewhere := k.disp.Leases().DevicesElsewhere(); len(elsewhere) > 0 {
		ids = slices.Compact(slices.Sorted(slices.Values(append(ids, elsewhere...))))
	}
	devices, err := k.Devices(ctx, c)
	if err != nil || devices == nil {
		return ids, err
	}
	in := map[string]bool{}
	for _, id := range devices {
		in[id] = true
	}
	out := []string{}
	for _, id := range ids {
		cl := k.disp.Registry().Get(id)
		if cl == nil && in[id] || cl != nil && (cl.IsDevice() && in[id] || !cl.IsDevice() && in[cl.Target]) {
			out = append(out, id)
		}
	}
	return out, nil
}
