package inscope

import (
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// DeviceView is a device as the API shows it to a caller with scope:
// online state (linked here or, in a cluster, to another live node) and
// the system info of the live connection here, or else of its last
// registration, with the tools the scope allows.
func (k *Checker) DeviceView(d store.Device, scope access.Scope) api.Device {
	v := api.Device{ID: d.ID, Labels: d.Labels, CreatedAt: d.CreatedAt}
	c := k.disp.Registry().Device(d.ID)
	if seen := LastSeen(c, d.LastSeen); !seen.IsZero() {
		v.LastSeen = &seen
	}
	if d.Rotation != nil {
		rv := RotationView(d.ID, d.Rotation)
		v.TokenRotation = &rv
	}
	if c != nil {
		v.Online, v.Info = true, c.Info.Load()
	} else {
		v.Online, v.Info = k.disp.Leases().LinkedElsewhere(d.ID), dispatch.StoredInfo(d)
	}
	v.Info = Info(v.Info, scope)
	return v
}

// LastSeen is when device c was last heard from, for the API: from its
// link if it is online, else as the store has it (stored).
func LastSeen(c *dispatch.Link, stored time.Time) time.Time {
	if c == nil {
		return stored
	}
	if heard := c.Conn.LastHeard(); heard.After(stored) {
		return heard
	}
	return stored
}

// RotationView is a pending rotation as the API shows it.
func RotationView(id string, rot *store.TokenRotation) api.TokenRotation {
	v := api.TokenRotation{ID: id, State: api.RotationPending, Grace: rot.Grace.String(), RequestedAt: rot.RequestedAt, Error: rot.Error}
	if !rot.SentAt.IsZero() {
		v.SentAt = &rot.SentAt
	}
	return v
}

// TaskView is a task as the API shows it, from its row.
func TaskView(row store.Session) api.Task {
	return api.Task{TaskSummary: TaskSummary(row), Plan: row.Plan, Result: row.Result, Error: row.Error, OriginalTaskName: row.OriginalTaskName}
}

// TaskSummary is a task as the API lists it, from its row.
func TaskSummary(row store.Session) api.TaskSummary {
	return api.TaskSummary{
		SessionID: row.ID, TaskName: row.TaskName, DeviceID: row.DeviceID,
		Requester: api.Requester{Kind: row.RequesterKind, ID: row.RequesterID, Identity: row.Identity, TokenID: row.TokenID},
		Kind:      row.Kind, ParentID: row.ParentID, State: api.TaskState(row.State), CreatedAt: row.CreatedAt,
		StartedAt: timePtr(row.StartedAt), FinishedAt: timePtr(row.FinishedAt),
	}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
