package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/eventlog"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/plan"
)

// Why a session was cancelled. The first three are UFO's.
const (
	// The constellation that asked for the task disconnected: nobody is
	// left to tell, so there is no TASK_END.
	reasonConstellationDisconnected = "constellation_disconnected"
	// The target device disconnected and did not come back in time: the
	// requester gets a TASK_END.
	reasonDeviceDisconnected = "device_disconnected"
	// Someone asked for it: the requester gets a TASK_END.
	reasonUserRequested = "user_requested"
	// The server is shutting down.
	reasonServerShutdown = "server_shutdown"
	// Another node adopted the session, this node having been taken for
	// dead: this one stops running it, and records and tells nothing.
	reasonAdoptedElsewhere = "adopted_elsewhere"
	// The node drains and hands the session off to another, which adopts
	// it: this one records and tells nothing more.
	reasonHandedOff = "handed_off"
	// Another request with the same Idempotency-Key, through another node,
	// recorded its task first: this one recorded nothing, and its caller
	// gets the other's outcome.
	reasonKeyTaken = "key_taken"
	// Its single command was not recorded, this node having begun to
	// doubt its cluster lease while the command waited for the store:
	// nothing of it is on record, and its caller hears 503, as for work
	// refused before it started (dispatch.NotRecorded).
	reasonNotRecorded = "not_recorded"
)

// Session is a task running on one device, or a fleet running one on
// many.
type Session struct {
	ID        string
	TaskName  string
	DeviceID  string // empty for a fleet
	ParentID  string // the fleet it runs for, if any
	Requester api.Requester
	// scope is the requester's, which each command is held to when sent.
	scope access.Scope
	// selector is a fleet's: the devices it may run on.
	selector  access.Selector
	Kind      string
	plan      *plan.Plan // a plan's or a fleet's
	planJSON  json.RawMessage
	steps     int          // how many steps its task has, for progress events
	fleet     *fleetRunner // a fleet's, which reports its progress
	createdAt time.Time
	events    *eventlog.Log
	ctx       context.Context
	cancel    context.CancelCauseFunc // with why, for the running step
	done      chan struct{}
	started   atomic.Bool // running, no longer created

	// persisted: its row was recorded when it was created, as a plan's or
	// a fleet's is; a single command's is recorded with its command. Set
	// before the session starts.
	persisted bool
	// key is the idempotency key of the request that asked for it, if
	// any: its row, when first recorded, records the key too.
	key *store.IdempotencyKey

	// originalTaskName is the name its client sent, when TaskName is that
	// name sanitized.
	originalTaskName string
	// waitsForDevice: a single command whose caller asked it to wait for
	// its device (api.CommandRequest.WaitForDevice). Fixed when it is made.
	waitsForDevice bool
	// owner is the node that runs it, recorded on its row.
	owner store.Owner
	// history is, for a session adopted from another node, the commands
	// that node recorded, by step and attempt: they are not made again
	// (sessionStepper.attempt). Fixed before it starts.
	history map[stepAttempt]store.Command

	mu       sync.Mutex
	reason   string // why it was cancelled; the first reason wins
	released sync.Once
}

func (s *Session) setReason(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason == "" {
		s.reason = reason
	}
}

// runningCommand is the response_id of the command s is waiting on, if
// any: the last step started and not ended.
func (s *Session) runningCommand() string {
	events, _, _ := s.events.Since(0)
	rid := ""
	for _, e := range events {
		switch e.Type {
		case api.EventStepStart:
			rid = e.ResponseID
		case api.EventStepEnd:
			rid = ""
		}
	}
	return rid
}

func (s *Session) cancelReason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

func (s *Session) row(state api.TaskState) store.Session {
	row := store.Session{
		ID: s.ID, TaskName: s.TaskName, DeviceID: s.DeviceID, RequesterKind: s.Requester.Kind,
		RequesterID: s.Requester.ID, By: requesterBy(s.Requester), Kind: s.Kind, OriginalTaskName: s.originalTaskName, ParentID: s.ParentID, State: string(state), Plan: s.planJSON, CreatedAt: s.createdAt,
		Key: s.key, Owner: s.owner,
	}
	if s.fleet != nil {
		b, _ := json.Marshal(s.selector) // a slice of strings always encodes
		row.Selector, row.Fleet = string(b), s.fleet.spec.record()
	}
	if state == api.StateRunning {
		row.StartedAt = time.Now()
	}
	return row
}

// recordsNothingHere reports whether the session, cancelled for reason,
// goes on (or went) elsewhere, or never started: this node then records
// and tells nothing of it.
func recordsNothingHere(reason string) bool {
	return reason == reasonAdoptedElsewhere || reason == reasonHandedOff || reason == reasonKeyTaken || reason == reasonNotRecorded
}

// requesterBy is the identity and token r names, as the store records it.
func requesterBy(r api.Requester) store.By { return store.By{Identity: r.Identity, TokenID: r.TokenID} }

func cancelMessage(reason, deviceID string) string {
	switch reason {
	case reasonConstellationDisconnected:
		return "task cancelled: the client that asked for it disconnected"
	case reasonDeviceDisconnected:
		return fmt.Sprintf("task cancelled: target device %q disconnected", deviceID)
	case reasonUserRequested:
		return "task cancelled on request"
	case reasonAdoptedElsewhere:
		return "task adopted by another node"
	case reasonHandedOff:
		return dispatch.ErrHandedOff.Error()
	case reasonKeyTaken:
		return "another request with its Idempotency-Key started its task first"
	case reasonNotRecorded:
		return "task not started: this node doubts its cluster lease"
	default:
		return "server shut down while the task ran"
	}
}

// taskEndStatus is the TASK_END status of a final state.
func taskEndStatus(state api.TaskState) protocol.TaskStatus {
	if state == api.StateCompleted {
		return protocol.StatusCompleted
	}
	return protocol.StatusFailed
}

// Done is closed once s has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// Selector is a fleet's: the devices it may run on; empty for others.
func (s *Session) Selector() access.Selector { return s.selector }
