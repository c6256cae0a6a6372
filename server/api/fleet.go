package api

import "encoding/json"

// FleetRequest is the body of POST /api/fleets: run a plan on every
// enrolled device whose labels include all of Labels, at most Concurrency
// at once, and stop starting devices once AbortPercent of them have
// failed.
type FleetRequest struct {
	Labels map[string]string `json:"labels"`
	// Plan is the plan, as a JSON object or as text (YAML or JSON).
	Plan     json.RawMessage `json:"plan"`
	TaskName string          `json:"task_name,omitempty"`
	// Concurrency bounds the devices running the plan at once. Default
	// DefaultFleetConcurrency.
	Concurrency int `json:"concurrency,omitempty"`
	// AbortPercent, from 1 to 100, stops starting devices once that share
	// of the matched devices has failed; the devices already running
	// finish. 0, the default, never stops.
	AbortPercent int `json:"abort_percent,omitempty"`
	// IdempotencyKey: see CommandRequest.IdempotencyKey.
	IdempotencyKey string `json:"-"`
}

// DefaultFleetConcurrency is a fleet's concurrency when the request names
// none.
const DefaultFleetConcurrency = 10

// FleetResponse is the answer to POST /api/fleets: the fleet's task and
// the devices it matched, in the order it starts them.
type FleetResponse struct {
	SessionID string   `json:"session_id"`
	TaskName  string   `json:"task_name"`
	Devices   []string `json:"devices"`
}

// Fleet device states, besides the final states of a task.
const (
	// StatePending: the device's task has not started yet.
	StatePending TaskState = "pending"
	// StateSkipped: the device's task never started: the fleet was
	// aborted or cancelled first.
	StateSkipped TaskState = "skipped"
)

// FleetResult is the result of a fleet: each device's outcome.
type FleetResult struct {
	Labels       map[string]string `json:"labels"`
	Concurrency  int               `json:"concurrency"`
	AbortPercent int               `json:"abort_percent,omitempty"`
	// Aborted is set once the abort threshold stopped the fleet from
	// starting more devices.
	Aborted bool          `json:"aborted,omitempty"`
	Devices []FleetDevice `json:"devices"`
}

// FleetDevice is one device's outcome in a fleet.
type FleetDevice struct {
	DeviceID string `json:"device_id"`
	// SessionID is the device's own task, once started.
	SessionID string `json:"session_id,omitempty"`
	// State is pending, running, completed, failed, cancelled or skipped.
	State TaskState `json:"state"`
	Error string    `json:"error,omitempty"`
}
