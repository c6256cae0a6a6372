package api

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
)

// TaskState is where a task (a session) is in its life: created → running
// → completed | failed | cancelled.
type TaskState string

// The values of TaskState.
const (
	StateCreated   TaskState = "created"
	StateRunning   TaskState = "running"
	StateCompleted TaskState = "completed"
	StateFailed    TaskState = "failed"
	StateCancelled TaskState = "cancelled"
)

// Valid reports whether s is one of the five states.
func (s TaskState) Valid() bool {
	switch s {
	case StateCreated, StateRunning, StateCompleted, StateFailed, StateCancelled:
		return true
	}
	return false
}

// Ended reports whether s is a final state.
func (s TaskState) Ended() bool {
	return s == StateCompleted || s == StateFailed || s == StateCancelled
}

// Requester kinds.
const (
	RequesterOperator      = "operator"
	RequesterConstellation = "constellation"
	// RequesterMCP is an operator identity acting through the MCP
	// gateway (/mcp): the task's origin, as the audit log's actor.
	RequesterMCP = "mcp"
	// ActorLocal is the actor of an audit entry for a call an application
	// on the device made through the agent's own MCP endpoint; the entry's
	// identity names that application.
	ActorLocal = "local"
)

// Requester is who asked for a task: through the HTTP API (kind
// operator), the MCP gateway (kind mcp), or a constellation client, with
// its client id; and the operator identity and token it acted for (none
// on tasks from before identities).
type Requester struct {
	Kind     string `json:"kind"`
	ID       string `json:"id,omitempty"`
	Identity string `json:"identity,omitempty"`
	TokenID  string `json:"token_id,omitempty"`
}

// String names the requester as the audit log does: "operator" or
// "constellation:ID".
func (r Requester) String() string {
	if r.ID == "" {
		return r.Kind
	}
	return r.Kind + ":" + r.ID
}

// Task kinds.
const (
	KindPlan    = "plan"
	KindCommand = "command"
	// KindFleet is a plan for every device whose labels match: its
	// children, one plan task per device, carry its id as ParentID.
	KindFleet = "fleet"
)

// TaskSummary is a task as GET /api/tasks lists it: what it is and where
// it stands, without its plan, result or error, which GET /api/tasks/{id}
// has. A listing stays small however large the tasks are.
type TaskSummary struct {
	SessionID string    `json:"session_id"`
	TaskName  string    `json:"task_name,omitempty"`
	DeviceID  string    `json:"device_id"`
	Requester Requester `json:"requester"`
	Kind      string    `json:"kind"`
	// ParentID is the fleet this task runs for, if any.
	ParentID   string     `json:"parent_id,omitempty"`
	State      TaskState  `json:"state"`
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// Task is one session: a plan or a single command run on one device, or
// a fleet (DeviceID empty) that runs a plan on many.
type Task struct {
	TaskSummary
	Plan json.RawMessage `json:"plan,omitempty"`
	// Result is a PlanResult for a plan, a CommandResponse for a command
	// and a FleetResult for a fleet (which shows, while the fleet runs,
	// its progress so far).
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	// Commands lists what was sent, in GET /api/tasks/{id} only.
	Commands []CommandRecord `json:"commands,omitempty"`

	// OriginalTaskName is the task name the client sent over the
	// WebSocket, when the server had to sanitize it into TaskName, as
	// UFO's server does (a galaxy client's galaxy/<task>/<name>).
	OriginalTaskName string `json:"original_task_name,omitempty"`
}

// Page sizes of GET /api/tasks.
const (
	DefaultTaskPage = 50
	MaxTaskPage     = 500
)

// TaskQuery picks a page of GET /api/tasks: tasks in State and of
// TaskName, each if not empty; at most Limit (DefaultTaskPage if 0, at
// most MaxTaskPage); after Cursor, the Next of the page before.
type TaskQuery struct {
	State    TaskState
	TaskName string
	Limit    int
	Cursor   string
}

// TaskPage is one page of GET /api/tasks: summaries, newest first, and
// Next, the opaque cursor of the page after it, empty on the last page.
type TaskPage struct {
	Tasks []TaskSummary `json:"tasks"`
	Next  string        `json:"next,omitempty"`
}

// CommandRecord is one COMMAND of a task as the server recorded it.
type CommandRecord struct {
	ResponseID string `json:"response_id"`
	Step       int    `json:"step"`
	Attempt    int    `json:"attempt"`
	// Status is pending, done (the device's results are recorded) or
	// failed (no results: offline, timed out, server restarted).
	Status string `json:"status"`
	// Late is set when the device's results arrived after the command
	// had failed; they are recorded all the same.
	Late       bool              `json:"late,omitempty"`
	Error      string            `json:"error,omitempty"`
	Results    []protocol.Result `json:"results,omitempty"`
	CreatedAt  time.Time         `json:"created_at"`
	FinishedAt *time.Time        `json:"finished_at,omitempty"`
}

// PlanResult is the result of a plan: one StepResult per step.
type PlanResult struct {
	Steps []StepResult `json:"steps"`
	// ResultsOmitted is set only in a TASK_END whose whole result would
	// not fit in a frame: the steps come without their results, and it
	// says why and where the whole result is (GET /api/tasks/{id}).
	ResultsOmitted string `json:"results_omitted,omitempty"`
}

// WithoutResults is r with each step's status and error but not its
// results, and note in ResultsOmitted.
func (r PlanResult) WithoutResults(note string) PlanResult {
	steps := make([]StepResult, len(r.Steps))
	for i, st := range r.Steps {
		st.Results = nil
		steps[i] = st
	}
	return PlanResult{Steps: steps, ResultsOmitted: note}
}

// Step statuses. A plan that has ended has each step's success, failure
// or skipped; while it runs, GET /api/tasks/{id} shows its progress so
// far, in which a step may also be pending (not started yet) or running
// (an attempt is out; a retry keeps the last attempt's error).
const (
	StepSuccess = "success"
	StepFailure = "failure"
	StepSkipped = "skipped"
	StepPending = "pending"
	StepRunning = "running"
)

// StepResult is how one step of a plan went: its last attempt's command
// and results.
type StepResult struct {
	Step       int               `json:"step"`
	Tool       string            `json:"tool"`
	Status     string            `json:"status"`
	Attempts   int               `json:"attempts,omitempty"`
	ResponseID string            `json:"response_id,omitempty"`
	Results    []protocol.Result `json:"results,omitempty"`
	Error      string            `json:"error,omitempty"`
}

// DispatchRequest is the body of POST /api/dispatch, UFO's dispatch with a
// plan. Request is UFO's field: here it carries a plan as text (YAML or
// JSON), since this server has no LLM to plan from prose. Plan is the same
// as a JSON object or string. Give one of the two.
type DispatchRequest struct {
	ClientID string          `json:"client_id"`
	Request  string          `json:"request,omitempty"`
	Plan     json.RawMessage `json:"plan,omitempty"`
	TaskName string          `json:"task_name,omitempty"`
	// IdempotencyKey: see CommandRequest.IdempotencyKey.
	IdempotencyKey string `json:"-"`
}

// DispatchResponse is the answer to POST /api/dispatch.
type DispatchResponse struct {
	Status    string `json:"status"`
	TaskName  string `json:"task_name"`
	ClientID  string `json:"client_id"`
	SessionID string `json:"session_id"`
}

// TaskResult is the body of GET /api/task_result/{task_name}: status
// "pending" until the task ends, then "done" with its result. SessionID
// (the task the name maps to, as UFO's get_result_by_task finds it once
// the task exists), State and Error are edgeaip's additions.
type TaskResult struct {
	Status    string          `json:"status"`
	SessionID string          `json:"session_id,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	State     TaskState       `json:"state,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// Clients is the body of GET /api/clients.
type Clients struct {
	OnlineClients []string `json:"online_clients"`
}

// Task event types, as GET /api/tasks/{id}/events names them.
const (
	EventStepStart = "step_start"
	EventStepEnd   = "step_end"
	// EventPreparing: the device has the step's command, and prepares
	// the tool it waits for (Preparing says how far along); the step's
	// timeout is held meanwhile. Stage "ready" ends it. Devices on UFO's
	// JSON wire never say so.
	EventPreparing = "preparing"
	EventEnd       = "end"
	// A fleet's events: a device's task starts, then its steps' events
	// follow (without their results), then it ends.
	EventDeviceStart = "device_start"
	EventDeviceEnd   = "device_end"
)

// PreparingText says what a preparing event says, for people: "preparing
// hash_file (initializing, step 2/3)", or "hash_file prepared".
func PreparingText(p *protocol.Preparing) string {
	if p == nil {
		return "preparing"
	}
	if p.Stage == protocol.PreparingReady {
		return p.ToolName + " prepared"
	}
	return fmt.Sprintf("preparing %s (%s, step %d/%d)", p.ToolName, p.Stage, p.Step, p.Steps)
}

// TaskEvent is one Server-Sent Event of a task: a step's start, its
// results, and finally the task's end. A fleet's stream carries its
// devices' events too, each with the device's own SessionID.
type TaskEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	// DeviceID is the device the event happened on; empty for a fleet's
	// own end.
	DeviceID string `json:"device_id,omitempty"`
	// Steps is how many steps the task has, on step_start, step_end and
	// device_start.
	Steps int `json:"steps,omitempty"`
	// Step, Attempt, Tool and ResponseID describe the step's attempt.
	Step       *int   `json:"step,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	Tool       string `json:"tool,omitempty"`
	ResponseID string `json:"response_id,omitempty"`
	// Status is the step's (success, failure) or the task's (completed,
	// failed).
	Status  string            `json:"status,omitempty"`
	Results []protocol.Result `json:"results,omitempty"`
	// Preparing is how far the device has come preparing the tool, on
	// preparing.
	Preparing *protocol.Preparing `json:"preparing,omitempty"`
	// State is the task's final state, on end and device_end.
	State  TaskState `json:"state,omitempty"`
	Result any       `json:"result,omitempty"`
	Error  string    `json:"error,omitempty"`
	Time   time.Time `json:"time"`
}

// AuditEntry is one line of the audit log (GET /api/audit): a tool call,
// or, with an Action, a change to devices or identities.
type AuditEntry struct {
	Seq int64     `json:"seq"`
	At  time.Time `json:"at"`
	// Actor is how it was asked for: operator (the API), mcp (the MCP
	// gateway), constellation:ID, or local (an application on the device,
	// through the agent's own MCP endpoint).
	Actor string `json:"actor"`
	// Identity and TokenID name the operator identity, and its token, it
	// was done for; entries from before identities name none.
	Identity string `json:"identity,omitempty"`
	TokenID  string `json:"token_id,omitempty"`
	// Action is what was changed: device.enroll, device.revoke,
	// device.rotate_token, device.certificate, device.label,
	// identity.add, identity.revoke, identity.rotate,
	// identity.revoke_token, module.upload, rollout.apply, rollout.pause,
	// rollout.resume, rollout.rollback or release.publish. Empty for a
	// tool call.
	Action       string                `json:"action,omitempty"`
	DeviceID     string                `json:"device_id"`
	SessionID    string                `json:"session_id"`
	ResponseID   string                `json:"response_id"`
	CallID       string                `json:"call_id"`
	Tool         string                `json:"tool"`
	Namespace    string                `json:"namespace,omitempty"`
	ModuleSHA256 string                `json:"module_sha256,omitempty"`
	Parameters   json.RawMessage       `json:"parameters"`
	Outcome      protocol.ResultStatus `json:"outcome"`
	Error        string                `json:"error,omitempty"`
	Late         bool                  `json:"late,omitempty"`
}
