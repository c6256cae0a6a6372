package cluster

import (
	"errors"
	"fmt"

	"github.com/edgeaip/edgeaip/protocol"
)

// The checks of the inter-node messages, made on each as it is decoded:
// NATS is the network, and a message no node of this version sends (a
// forged one, a bug's, a truncated one) is refused whole, naming the
// field, rather than half acted on.

// checkNodeID refuses what no node id can be (CheckNodeID): field names
// where it was found.
func checkNodeID(field, id string) error {
	if err := CheckNodeID(id); err != nil {
		return fmt.Errorf("field %q: %w", field, err)
	}
	return nil
}

// checkEpoch refuses an epoch below 1: epochs start at 1.
func checkEpoch(field string, epoch int64) error {
	if epoch < 1 {
		return fmt.Errorf("field %q: epoch %d: want 1 or more", field, epoch)
	}
	return nil
}

// checkDeviceID refuses an empty device id.
func checkDeviceID(id string) error {
	if id == "" {
		return errors.New(`field "device_id": missing`)
	}
	return nil
}

func (cmd *Command) check() error {
	switch {
	case cmd.Message == nil:
		return errors.New(`field "message": missing`)
	case cmd.Message.Type != protocol.ServerCommand && cmd.Message.Type != protocol.ServerCancelCommand:
		return fmt.Errorf(`field "message": type %.40q: want %q or %q`, cmd.Message.Type, protocol.ServerCommand, protocol.ServerCancelCommand)
	case cmd.Message.ResponseID == "":
		return errors.New(`field "message": response_id missing`)
	case cmd.Timeout < 0:
		return fmt.Errorf(`field "timeout": %s: want 0 or more`, cmd.Timeout)
	}
	return errors.Join(checkDeviceID(cmd.DeviceID), checkEpoch("lease_epoch", cmd.LeaseEpoch),
		checkNodeID("from", cmd.From), checkEpoch("from_epoch", cmd.FromEpoch))
}

func (r *Reply) check() error {
	switch r.Outcome {
	case Sent, Stale, Between, Down, Offline, Failed:
		return nil
	}
	return fmt.Errorf(`field "outcome": %.40q: not an outcome this node knows`, r.Outcome)
}

func (l *LeaseChange) check() error {
	if err := errors.Join(checkDeviceID(l.DeviceID), checkEpoch("epoch", l.Epoch)); err != nil || l.NodeID == "" {
		return err // a released lease names no node
	}
	return errors.Join(checkNodeID("node_id", l.NodeID), checkEpoch("node_epoch", l.NodeEpoch))
}

func (r *Recorded) check() error {
	says := 0
	for _, b := range []bool{len(r.Results) > 0, r.Refused != "", r.ShutDown} {
		if b {
			says++
		}
	}
	switch {
	case r.ResponseID == "":
		return errors.New(`field "response_id": missing`)
	case says > 1:
		return errors.New(`fields "results", "refused" and "shut_down": more than one given; a command ends one way`)
	}
	return checkDeviceID(r.DeviceID)
}

func (p *Preparing) check() error {
	if err := checkDeviceID(p.DeviceID); err != nil {
		return err
	}
	m := protocol.ClientMessage{Type: protocol.ClientPreparing, Status: protocol.StatusContinue, PrevResponseID: p.ResponseID, Preparing: &p.Preparing}
	return m.Validate()
}

func (u *Unrecorded) check() error {
	switch {
	case u.ResponseID == "":
		return errors.New(`field "response_id": missing`)
	case u.Why == "":
		return errors.New(`field "why": missing`)
	}
	if err := checkNodeID("from", u.From); err != nil {
		return err
	}
	return checkDeviceID(u.DeviceID)
}

func (r *Revocation) check() error {
	if r.Identity == "" {
		return errors.New(`field "identity": missing`)
	}
	return checkNodeID("from", r.From)
}

func (e *DeviceEvent) check() error {
	switch e.What {
	case DeviceRevoked, DeviceChanged, DeviceRotate, DeviceRotationSettled:
	default:
		return fmt.Errorf(`field "what": %.40q: not a device event this node knows`, e.What)
	}
	return errors.Join(checkDeviceID(e.DeviceID), checkNodeID("from", e.From))
}
