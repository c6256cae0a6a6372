package api

import (
	"encoding/json"
	"time"
)

// RequesterRollout is the requester kind of a rollout's tasks: the
// server, acting for the rollout that its ID names.
const RequesterRollout = "rollout"

// Audit actions of rollouts and labels.
const (
	ActionDeviceLabel     = "device.label"
	ActionModuleUpload    = "module.upload"
	ActionRolloutApply    = "rollout.apply"
	ActionRolloutPause    = "rollout.pause"
	ActionRolloutResume   = "rollout.resume"
	ActionRolloutRollback = "rollout.rollback"
)

// LabelRequest is the body of PATCH /api/devices/{id}/labels: labels to
// set, and keys to remove.
type LabelRequest struct {
	Set    map[string]string `json:"set,omitempty"`
	Remove []string          `json:"remove,omitempty"`
}

// ModuleResponse is the answer to PUT /api/modules/{sha256}: the module
// the server keeps, by digest, for rollouts.
type ModuleResponse struct {
	SHA256 string `json:"sha256"`
	Tool   string `json:"tool"`
	Bytes  int64  `json:"bytes"`
}

// RolloutApplied is the answer to POST /api/rollouts: the revision the
// spec became, and the devices its selector picks now.
type RolloutApplied struct {
	Name     string `json:"name"`
	Revision int    `json:"revision"`
	Selected int    `json:"selected"`
	// Unchanged is set when the spec is the current revision's: no new
	// revision was made.
	Unchanged bool `json:"unchanged,omitempty"`
	// Note says what an operator should know: a selector that picks no
	// device.
	Note string `json:"note,omitempty"`
}

// Rollout states.
const (
	RolloutRolling     = "rolling"      // waves open, devices changing
	RolloutWaiting     = "waiting"      // a wave done; the next opens after between_waves
	RolloutApproval    = "approval"     // a wave done; the next opens on resume
	RolloutPaused      = "paused"       // stopped by hand or past max_failures
	RolloutDone        = "done"         // every selected device at the revision; new ones get it
	RolloutRollingBack = "rolling_back" // devices going back to the previous revision
	RolloutRolledBack  = "rolled_back"  // back at the previous revision
)

// RolloutStates are a rollout's states, in the order it goes through
// them.
var RolloutStates = []string{RolloutRolling, RolloutWaiting, RolloutApproval, RolloutPaused, RolloutDone, RolloutRollingBack, RolloutRolledBack}

// Device states in a rollout.
const (
	DevicePending  = "pending"  // its wave is not open yet
	DeviceWaiting  = "waiting"  // its wave is open; it is offline, and changes when it links
	DeviceChanging = "changing" // staging, applying, or running health checks
	DeviceDone     = "done"     // at the revision, health checks passed
	DeviceFailed   = "failed"   // a stage, the apply, a health check or the device timeout failed
	DeviceRemoving = "removing" // left the selector: its tools of the rollout are removed
	DeviceDrift    = "drift"    // a tool deployed by hand, with force, in place of the rollout's
	DeviceSkipped  = "skipped"  // the rollout's agent has no release for the device's platform
)

// RolloutDeviceStates are a device's states in a rollout, in the order
// it goes through them.
var RolloutDeviceStates = []string{DevicePending, DeviceWaiting, DeviceChanging, DeviceDone, DeviceFailed, DeviceRemoving, DeviceDrift, DeviceSkipped}

// Rollout is a rollout's status: where it is, its waves, and each
// selected device.
type Rollout struct {
	Name string `json:"name"`
	// Revision is the revision devices are brought to (0: none, after a
	// first revision was rolled back); Latest the newest applied.
	Revision int    `json:"revision"`
	Latest   int    `json:"latest"`
	State    string `json:"state"`
	Reason   string `json:"reason,omitempty"`
	// Selector, Tools and Agent (its agent version, if it names one) are
	// the desired revision's.
	Selector string            `json:"selector"`
	Tools    map[string]string `json:"tools"`
	Agent    string            `json:"agent,omitempty"`
	// Wave is the last wave open, from 0.
	Wave      int             `json:"wave"`
	Waves     []RolloutWave   `json:"waves"`
	Counts    map[string]int  `json:"counts"`
	Devices   []RolloutDevice `json:"devices,omitempty"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// RolloutWave is one wave: its size as the file gives it, the devices
// in it, and how many of them are in each state.
type RolloutWave struct {
	Size    string         `json:"size"`
	Devices int            `json:"devices"`
	Open    bool           `json:"open"`
	Counts  map[string]int `json:"counts"`
}

// RolloutDevice is one selected device's state in a rollout.
type RolloutDevice struct {
	DeviceID string `json:"device_id"`
	Wave     int    `json:"wave"`
	State    string `json:"state"`
	// Revision is the revision its state is about; Applied the one it
	// runs, as last known (0: none).
	Revision int  `json:"revision"`
	Applied  int  `json:"applied"`
	Online   bool `json:"online"`
	// TaskID is its last task for the rollout.
	TaskID string `json:"task_id,omitempty"`
	Error  string `json:"error,omitempty"`
	// Drift lists the tools deployed by hand in place of the rollout's.
	Drift     map[string]string `json:"drift,omitempty"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// RolloutRevision is one revision in a rollout's history.
type RolloutRevision struct {
	Revision int               `json:"revision"`
	Tools    map[string]string `json:"tools"`
	// Outcome is how it ended: superseded, rolled back and why; empty
	// while it is the desired one.
	Outcome   string          `json:"outcome,omitempty"`
	CreatedBy string          `json:"created_by,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	Spec      json.RawMessage `json:"spec"`
}
