package protocol

import "strings"

// The wire's rule for a command: every action ends in a Result that carries
// its call_id, whatever happens to the command (the device is offline, it
// times out, a reply does not fit in a frame, the agent restarts). These
// are the one place that rule is written; the server and the agent both
// call them.

// CallIDs lists the call_ids of actions, in order.
func CallIDs(actions []Command) []string {
	ids := make([]string, len(actions))
	for i, a := range actions {
		ids[i] = a.CallID
	}
	return ids
}

// ResultCallIDs lists the call_ids of results, in order.
func ResultCallIDs(results []Result) []string {
	ids := make([]string, len(results))
	for i, r := range results {
		ids[i] = r.CallID
	}
	return ids
}

// JoinCallIDs is call_ids as logs carry them: comma-separated.
func JoinCallIDs(ids []string) string { return strings.Join(ids, ",") }

// FailAll is the Results of calls that got no answer: for each call_id, a
// failure that says why.
func FailAll(callIDs []string, why string) []Result {
	out := make([]Result, len(callIDs))
	for i, id := range callIDs {
		out[i] = Result{Status: ResultFailure, Error: why, CallID: id}
	}
	return out
}

// ErrNoResult is the error of an action a reply left out.
const ErrNoResult = "device returned no result for this action"

// MatchResults orders the results a device sent by the call_ids of the
// actions they answer: one Result per action, in the actions' order, with
// a failure (ErrNoResult) for an action the device did not answer.
// Results for call_ids no action has are dropped.
func MatchResults(actions []Command, got []Result) []Result {
	byCall := make(map[string]Result, len(got))
	for _, r := range got {
		byCall[r.CallID] = r
	}
	out := make([]Result, len(actions))
	for i, a := range actions {
		r, ok := byCall[a.CallID]
		if !ok {
			r = Result{Status: ResultFailure, Error: ErrNoResult, CallID: a.CallID}
		}
		out[i] = r
	}
	return out
}
