package cluster

import (
	"errors"
	"fmt"
	"regexp"
)

// rolloutSubject is where a node tells the others what the leader of a
// rollout, wherever it is, must hear at once: a device that registered
// on the node holding its link, a rollout changed on a node that may
// not lead it. A subject of its own, to which a node that predates it
// does not subscribe: an old node never hears it, and serves on.
const rolloutSubject = "aip.rollout"

// RolloutEvent is what node From tells the leaders of rollouts: either
// a rollout changed there (Rollout: applied, paused, resumed, rolled
// back, or its lead given up), or a device registered there (DeviceID:
// linked, or linked again with a new inventory).
type RolloutEvent struct {
	From     string `json:"from"`
	Rollout  string `json:"rollout,omitempty"`
	DeviceID string `json:"device_id,omitempty"`
}

// validRollout is what a rollout's name may be (server/rollout).
var validRollout = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$`)

func (e *RolloutEvent) check() error {
	if err := checkNodeID("from", e.From); err != nil {
		return err
	}
	switch {
	case (e.Rollout == "") == (e.DeviceID == ""):
		return errors.New(`fields "rollout" and "device_id": want one of them`)
	case e.Rollout != "" && !validRollout.MatchString(e.Rollout):
		return fmt.Errorf(`field "rollout": %.80q: not a rollout's name`, e.Rollout)
	}
	return nil
}

// PublishRolloutEvent tells every other node of e, made here.
func (c *Cluster) PublishRolloutEvent(e RolloutEvent) error {
	e.From = c.cfg.NodeID
	return c.publish(rolloutSubject, e)
}

// OnRolloutEvent calls fn with each rollout event another node
// publishes.
func (c *Cluster) OnRolloutEvent(fn func(RolloutEvent)) error {
	return on[RolloutEvent](c, rolloutSubject, func(e RolloutEvent) {
		if e.From != c.cfg.NodeID {
			fn(e)
		}
	})
}
