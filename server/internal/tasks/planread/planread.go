// Package planread reads the plan a request carries: a "plan" field (a
// JSON object, or YAML or JSON as text), or UFO's "request" text, each
// bounded in how far its aliases may expand it. Every surface that takes
// a plan reads it here, before it hands it to the front door.
package planread

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/server/plan"
)

// Field reads a request's "plan" field: a plan as a JSON object, or
// as text (YAML or JSON).
func Field(raw json.RawMessage, maxExpanded int) (*plan.Plan, error) {
	doc := []byte(raw)
	var text string
	if json.Unmarshal(raw, &text) == nil {
		doc = []byte(text)
	}
	p, err := parse(doc, maxExpanded)
	if err != nil {
		return nil, InField("plan", err)
	}
	return p, nil
}

// parse reads a plan whose aliases may expand it to maxExpanded bytes;
// one that expands further is refused as admission refuses it.
func parse(doc []byte, maxExpanded int) (*plan.Plan, error) {
	p, err := plan.ParseWithin(doc, maxExpanded)
	var big *plan.ExpandedError
	if errors.As(err, &big) {
		return nil, &tasks.Refusal{Problems: []api.Problem{{Path: "plan", Problem: tasks.PlanTooBig(big.Size, big.Limit, true)}}}
	}
	return p, err
}

// InField says which field of a request err is about; a refusal names
// its own paths.
func InField(field string, err error) error {
	var refused *tasks.Refusal
	if errors.As(err, &refused) {
		return err
	}
	return fmt.Errorf("field %q: %w", field, err)
}

// FromRequest reads the plan a request carries. UFO's requests are
// prose for an LLM; this server has no planner, so a request must be a
// plan (YAML or JSON).
func FromRequest(request string, maxExpanded int) (*plan.Plan, error) {
	if request == "" {
		return nil, errors.New("empty task content")
	}
	p, err := parse([]byte(request), maxExpanded)
	var refused *tasks.Refusal
	if err != nil && !errors.As(err, &refused) {
		return nil, fmt.Errorf("not a plan (this server runs plans, not prose): %w", err)
	}
	return p, err
}
