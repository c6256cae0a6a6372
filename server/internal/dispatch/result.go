package dispatch

import (
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
)

// Result is how one command ended, for the runner that asked for
// it.
type Result struct {
	// ResponseID is the command's, or "" if none was recorded.
	ResponseID string
	// Results has one Result per action, in order, each with its call_id;
	// nil if the command never ran.
	Results []protocol.Result
	// Err says why the command never ran or was not recorded: it was
	// cancelled first, its actions did not resolve, the store failed.
	Err error
	// Recorded: the store holds this outcome, and the end of the session
	// the command alone makes up (see commandSpec.session).
	Recorded bool
	// Stopped: its task was cancelled, and the command with it (Stop).
	Stopped bool
}

// Failure says why the command did not succeed, or is "" if every action
// did.
func (r Result) Failure() string {
	if r.Err != nil {
		return r.Err.Error()
	}
	return api.FirstError(r.Results)
}

// Status is the command's as a step's: success or failure.
func (r Result) Status() string {
	if r.Failure() == "" {
		return api.StepSuccess
	}
	return api.StepFailure
}

// notStopped is the stopped of a command no task cancelled.
func notStopped() bool { return false }
