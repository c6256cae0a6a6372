package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/nats-io/nats.go"
)

// Subjects. A device's is one per device, to which only the node holding
// its link subscribes; a node's, to which that node alone does; the rest
// every node hears.
const (
	leaseSubject       = "aip.lease"
	recordedSubject    = "aip.recorded"
	revokeSubject      = "aip.revoke"
	deviceEventSubject = "aip.device"
	versionHeader      = "Aip-Cluster-Version"
)

// deviceSubject is device id's subject. A device id may hold '.', NATS's
// token separator, which is '~' here: '~' is in no device id.
func deviceSubject(id string) string { return "aip.dev." + strings.ReplaceAll(id, ".", "~") }

func nodeSubject(id string) string { return "aip.node." + id }

// preparingSubject is where node id hears of the preparations of the
// commands it asked for (Preparing): a subject of its own beside the
// node's, to which a node that predates it does not subscribe, so that it
// never hears, and never misreads, a message it has no use for.
func preparingSubject(id string) string { return nodeSubject(id) + ".preparing" }

// ErrNoHolder: no node listens on the device's subject (NATS's "no
// responders"): a hint to read the device's lease again, not a verdict.
var ErrNoHolder = errors.New("no node answers for the device")

// ErrNATS: NATS is not connected; cross-node work is refused meanwhile.
var ErrNATS = errors.New("NATS not connected")

// Command is a command for a device, sent to the node holding its link.
type Command struct {
	DeviceID string `json:"device_id"`
	// LeaseEpoch is the epoch of the device's lease the sender read: a
	// holder at another epoch refuses it (Stale).
	LeaseEpoch int64 `json:"lease_epoch"`
	// From is the node that asked, and awaits the results.
	From      string        `json:"from"`
	FromEpoch int64         `json:"from_epoch"`
	Timeout   time.Duration `json:"timeout"`
	// Deadline is when the sender fails the command unless it has ended:
	// the holder does not send it on the link past it (a message NATS
	// held through a partition comes too late to run). Zero from a node
	// that predates it.
	Deadline time.Time `json:"deadline,omitzero"`
	// Message is the COMMAND, as it goes to the device.
	Message *protocol.ServerMessage `json:"message"`
	// Session is the row of the session the command alone makes up, if
	// it does: the node its device answers on ends it in the write that
	// records the results, as the asking node would (Recorded.SessionEnded).
	Session *store.Session `json:"session,omitempty"`
}

// Outcomes of a Command at the node it was sent to.
const (
	Sent    = "sent"    // on the device's link
	Stale   = "stale"   // the holder is not at the lease epoch sent; Reply.Lease is its
	Between = "between" // the device is between links; Reply.GraceLeft is what is left of its grace
	Down    = "shutdown"
	Offline = "offline"
	Failed  = "failed" // Reply.Error says why
)

// Reply is a holder's answer to a Command.
type Reply struct {
	Outcome   string        `json:"outcome"`
	Lease     int64         `json:"lease,omitempty"`
	GraceLeft time.Duration `json:"grace_left,omitempty"`
	Error     string        `json:"error,omitempty"`
	// SenderGone: Failed, because the node that sent the command no
	// longer holds its lease at the epoch it named. Its sessions are, or
	// will be, another node's, which sends the command again: the sender
	// must not record it failed.
	SenderGone bool `json:"sender_gone,omitempty"`
}

// LeaseChange says a node took (NodeID set) or released a device's lease.
type LeaseChange struct {
	DeviceID  string `json:"device_id"`
	NodeID    string `json:"node_id"`
	NodeEpoch int64  `json:"node_epoch"`
	Epoch     int64  `json:"epoch"`
}

// Recorded carries the results of a command, recorded by the node its
// device answered on, to the node that asked for it; or, with Refused,
// the device's ERROR about the command, which it will not run; or, with
// ShutDown, that the device stopped before it answered.
type Recorded struct {
	ResponseID string            `json:"response_id"`
	DeviceID   string            `json:"device_id"`
	Results    []protocol.Result `json:"results,omitempty"`
	Refused    string            `json:"refused,omitempty"`
	// SessionEnded: the write that recorded the results ended the
	// command's session too (Command.Session).
	SessionEnded bool `json:"session_ended,omitempty"`
	// ShutDown: no results; the device shut down on purpose (its agent
	// closed the link as it stopped) before it answered.
	ShutDown bool `json:"shut_down,omitempty"`
}

// Preparing carries a device's word that it prepares the tool of a
// command (protocol.ClientPreparing), heard by the node that holds its
// link, to the node that asked for the command, whose wait it extends.
type Preparing struct {
	ResponseID string             `json:"response_id"`
	DeviceID   string             `json:"device_id"`
	Preparing  protocol.Preparing `json:"preparing"`
}

// Unrecorded says that a device answered a command on the node holding
// its link, which could not record the results: its store failed (Why).
// It keeps them, and records them once it can, late. It goes on a subject
// of its own, beside the node's: a node that predates it does not
// subscribe to it, rather than read it as results.
type Unrecorded struct {
	ResponseID string `json:"response_id"`
	DeviceID   string `json:"device_id"`
	From       string `json:"from"`
	Why        string `json:"why"`
}

func unrecordedSubject(node string) string { return nodeSubject(node) + ".unrecorded" }

// message is v as a NATS message on subject, with the protocol version.
func message(subject string, v any) (*nats.Msg, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode %T: %w", v, err)
	}
	m := nats.NewMsg(subject)
	m.Data = data
	m.Header.Set(versionHeader, strconv.Itoa(ProtocolVersion))
	return m, nil
}

// publish sends v on subject, to whoever listens.
func (c *Cluster) publish(subject string, v any) error {
	if !c.nc.IsConnected() {
		return ErrNATS
	}
	m, err := message(subject, v)
	if err != nil {
		return err
	}
	if err := c.nc.PublishMsg(m); err != nil {
		return fmt.Errorf("cluster: publish on %s: %w", subject, err)
	}
	return nil
}

// SendCommand sends cmd to the node holding its device's link and returns
// its answer. ErrNoHolder: no node listens for the device.
func (c *Cluster) SendCommand(ctx context.Context, cmd Command) (Reply, error) {
	if !c.nc.IsConnected() {
		return Reply{}, ErrNATS
	}
	m, err := message(deviceSubject(cmd.DeviceID), cmd)
	if err != nil {
		return Reply{}, err
	}
	resp, err := c.nc.RequestMsgWithContext(ctx, m)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return Reply{}, fmt.Errorf("cluster: device %q: %w", cmd.DeviceID, ErrNoHolder)
	case err != nil:
		return Reply{}, fmt.Errorf("cluster: command for device %q: %w", cmd.DeviceID, err)
	}
	var r Reply
	if err := decode(resp, &r); err != nil {
		// A holder that answers what this node cannot read cannot be
		// sent the command: reading its lease again would only ask it again.
		c.log.Error("cluster: reply not understood", "device", cmd.DeviceID, "err", err)
		return Reply{Outcome: Failed, Error: fmt.Sprintf("the node holding the device's link answered what this node cannot read: %v", err)}, nil
	}
	return r, nil
}

// ServeDevice answers, with serve, the commands sent for device id, until
// the returned stop is called: the node holding the device's lease does.
func (c *Cluster) ServeDevice(id string, serve func(Command) Reply) (stop func(), err error) {
	sub, err := c.nc.Subscribe(deviceSubject(id), func(m *nats.Msg) {
		if m.Reply == "" {
			// Nobody awaits its answer: no node sends a command so.
			c.drops.dropped("cluster: command dropped: it has no reply subject", "device", id, "subject", m.Subject)
			return
		}
		var cmd Command
		r := Reply{Outcome: Failed}
		err := decode(m, &cmd)
		if err == nil {
			err = c.refuseCommand(id, cmd)
		}
		if err != nil {
			c.drops.dropped("cluster: command refused", "device", id, "err", err)
			r.Error, r.SenderGone = err.Error(), errors.Is(err, errSenderGone)
		} else {
			r = serve(cmd)
		}
		out, err := message(m.Reply, r)
		if err == nil {
			err = m.RespondMsg(out)
		}
		if err != nil {
			c.log.Warn("cluster: reply not sent", "device", id, "err", err)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: serve device %q: %w", id, err)
	}
	// Served once NATS has the subscription, so that a command sent after
	// this returns finds it; a NATS too slow to say so only delays that,
	// and a sender meanwhile reads the lease again.
	if err := c.nc.FlushTimeout(time.Second); err != nil {
		c.log.Debug("cluster: subscription not confirmed", "device", id, "err", err)
	}
	return func() { sub.Unsubscribe() }, nil
}

// refuseCommand is why cmd, which came on the subject of device id, is
// not served: a command for another device, or from a node that is not
// live at the epoch it names (fenced, or an id taken over since); nil if
// it is served.
func (c *Cluster) refuseCommand(id string, cmd Command) error {
	if cmd.DeviceID != id {
		return fmt.Errorf("cluster: command for device %q came on the subject of device %q: refused", cmd.DeviceID, id)
	}
	if why := c.notLive(cmd.From, cmd.FromEpoch); why != "" {
		return fmt.Errorf("cluster: command for device %q from node %q at epoch %d: %s: %w", id, cmd.From, cmd.FromEpoch, why, errSenderGone)
	}
	return nil
}

// errSenderGone refuses a command from a node that no longer holds its
// lease at the epoch the command names.
var errSenderGone = errors.New("refused: the sender no longer holds its lease")

// checked is an inter-node message that can say what is wrong with it.
type checked[T any] interface {
	*T
	check() error
}

// decode reads m into v, refusing another protocol version, and what
// v's check refuses.
func decode[T any, P checked[T]](m *nats.Msg, v P) error {
	if got := m.Header.Get(versionHeader); got != strconv.Itoa(ProtocolVersion) {
		return fmt.Errorf("cluster: message on %s speaks inter-node protocol version %q, this node %d: refused", m.Subject, got, ProtocolVersion)
	}
	if err := json.Unmarshal(m.Data, v); err != nil {
		return fmt.Errorf("cluster: message on %s (%d bytes): %w", m.Subject, len(m.Data), err)
	}
	if err := v.check(); err != nil {
		return fmt.Errorf("cluster: message on %s: %w", m.Subject, err)
	}
	return nil
}

// on calls fn with each message on subject, decoded as a T; one that
// cannot be is logged and dropped.
func on[T any, P checked[T]](c *Cluster, subject string, fn func(T)) error {
	_, err := subscribe[T, P](c, subject, fn)
	return err
}

// subscribe is on, returning a function that stops it.
func subscribe[T any, P checked[T]](c *Cluster, subject string, fn func(T)) (stop func(), err error) {
	sub, err := c.nc.Subscribe(subject, func(m *nats.Msg) {
		var v T
		if err := decode[T, P](m, &v); err != nil {
			c.drops.dropped("cluster: message dropped", "err", err)
			return
		}
		fn(v)
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: subscribe to %s: %w", subject, err)
	}
	return func() { sub.Unsubscribe() }, nil
}

// PublishLease tells every node that a device's lease changed.
func (c *Cluster) PublishLease(l LeaseChange) error { return c.publish(leaseSubject, l) }

// OnLease calls fn with each lease change any node publishes, this
// one's included.
func (c *Cluster) OnLease(fn func(LeaseChange)) error { return on[LeaseChange](c, leaseSubject, fn) }

// Revocation is an operator identity, or some of its tokens, revoked on
// node From.
type Revocation struct {
	From     string   `json:"from"`
	Identity string   `json:"identity"`
	TokenIDs []string `json:"token_ids,omitempty"`
}

// PublishRevocation tells every node of a revocation made here.
func (c *Cluster) PublishRevocation(r Revocation) error {
	r.From = c.cfg.NodeID
	return c.publish(revokeSubject, r)
}

// OnRevocation calls fn with each revocation another node publishes.
func (c *Cluster) OnRevocation(fn func(Revocation)) error {
	return on[Revocation](c, revokeSubject, func(r Revocation) {
		if r.From != c.cfg.NodeID {
			fn(r)
		}
	})
}

// What a DeviceEvent says happened to a device.
const (
	DeviceRevoked = "revoked" // its link closes wherever it is
	DeviceChanged = "changed" // enrolled again, or its row changed: caches forget it
	// DeviceRotate: a token rotation was asked for; the node holding its
	// link offers the new token.
	DeviceRotate = "rotate"
	// DeviceRotationSettled: it confirmed, or failed to take, a new token.
	DeviceRotationSettled = "rotation_settled"
)

// DeviceEvent is a change to a device made on node From, which the
// other nodes act on.
type DeviceEvent struct {
	From     string `json:"from"`
	DeviceID string `json:"device_id"`
	What     string `json:"what"`
}

// PublishDeviceEvent tells every node of a change to a device made here.
func (c *Cluster) PublishDeviceEvent(e DeviceEvent) error {
	e.From = c.cfg.NodeID
	return c.publish(deviceEventSubject, e)
}

// OnDeviceEvent calls fn with each device event another node publishes.
func (c *Cluster) OnDeviceEvent(fn func(DeviceEvent)) error {
	return on[DeviceEvent](c, deviceEventSubject, func(e DeviceEvent) {
		if e.From != c.cfg.NodeID {
			fn(e)
		}
	})
}

// Connected reports whether NATS is connected: cross-node work needs it.
func (c *Cluster) Connected() bool { return c.nc.IsConnected() }
