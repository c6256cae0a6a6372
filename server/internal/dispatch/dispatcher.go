package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/lazylog"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/unrecorded"
	"github.com/edgeaip/edgeaip/server/metrics"
	"github.com/google/uuid"
)

// SendTimeout bounds writing one frame to a client.
const SendTimeout = 10 * time.Second

// Dispatcher sends COMMAND messages and ends each with its device's
// COMMAND_RESULTS or its timeout; see RATIONALE.md for why this loses
// nothing and records every result exactly once.
//
//   - A command is recorded before it is sent, and only then decided on:
//     see park, the one place that says when a command waits for its
//     device and when it fails at once.
//   - A command for a device between links (its link dropped within its
//     grace) waits, unsent, for the device to register again, within its
//     timeout and the grace; it fails when the grace ends, or when its
//     caller stops waiting, without ever being sent.
//   - If the device's link drops, the command waits for the device to
//     register again within its timeout, and is sent again on the new link
//     with the same response_id and call_ids; the agent answers a repeat
//     from its store instead of running it twice.
//   - The results are recorded, with their audit entries, by one
//     conditional write: the first COMMAND_RESULTS for a response_id wins,
//     even after the timeout or a server restart (then marked late), and
//     any repeat is acknowledged and ignored.
//   - Results, and failures, that the store cannot take now (a full disk)
//     are kept and recorded once it can; see RATIONALE.md, "A full disk".
type Dispatcher struct {
	store      *store.Store
	unrecorded *unrecorded.Writes
	reg        *Registry
	metrics    *metrics.Metrics
	// answer tells a device how its results, kept while the store could
	// not take them, ended: deliver's error for them.
	answer func(deviceID string, m *protocol.ClientMessage, err error)
	// sessionEnd is the row of the session a single command makes up as
	// it ends with the command rec, stopped if its task was cancelled
	// (Stop): the front door's judgement of it (tasks.CommandOutcome),
	// which the dispatcher records with the command's outcome
	// (RATIONALE.md, "One straight path for a command").
	sessionEnd func(row store.Session, rec store.Command, stopped bool) (store.Session, error)
	log        *slog.Logger
	// frameCap is the largest frame a link carries.
	frameCap int64
	// prepBound is how much longer a command waits, in all, while its
	// device prepares its tool (preparing.go).
	prepBound time.Duration

	// remote reaches devices linked to other nodes: singleNode on a
	// single node (remote.go).
	remote remote

	mu      sync.Mutex
	pending map[string]*Command // by response_id
	// frozen: the node handed its sessions off (freeze): it records no
	// new command and no failure, and sends nothing more.
	frozen bool
}

// Command is a COMMAND waiting for its results.
type Command struct {
	rec store.Command
	msg *protocol.ServerMessage
	// session: see commandSpec.session.
	session *store.Session
	timeout time.Duration
	// waitForDevice: its caller asked it to wait, within its timeout, for
	// a device that is not online, whatever the reason, rather than fail.
	waitForDevice bool
	// inFlight: it was recorded, and may have been sent, by a node whose
	// session this one adopted (this node itself at an earlier epoch,
	// maybe). It waits for its device within its timeout, as a command
	// whose link dropped does, and has left (below) from the start.
	inFlight bool
	// fence, if set, is the owner that must still run the command's
	// session when it is recorded, or failed (store.SessionWrites.Fence): a
	// node another has adopted the session from neither makes a command
	// nor fails one the adopter sends again.
	fence *store.Owner
	log   lazylog.Logger // names the command: see logAttrs
	start time.Time      // when it was recorded

	done chan struct{}
	once sync.Once
	// Set before done closes.
	results  []protocol.Result
	failed   string // why there are no device results, or ""
	recorded bool   // the store holds this outcome
	fenced   bool   // another node adopted its session: see fence
	// stopped: its task was cancelled, and it with it (Stop); its
	// session ends cancelled rather than failed.
	stopped atomic.Bool

	// Guarded by dispatcher.mu.
	sentOn *Link // the link it was sent on; nil once that link dropped
	sent   bool  // it went out on some link
	// left: it was handed to a link, or to another node, at least once,
	// and may have reached the device; a command that never left fails
	// at its deadline as "not sent", and never runs.
	left bool
	// deadline is when it fails, if nothing ended it first: its
	// timeout from when it was decided on (park). A node holding the
	// device's link does not send it on past it.
	deadline time.Time
	// elsewhere is its sending to another node (cluster mode).
	elsewhere sentElsewhere
	timer     *time.Timer
	// unsentTimer fails the command if it is still unsent when its
	// device's grace ends.
	unsentTimer *time.Timer
	// abandoned: its device's grace ended, so it is not sent again; a
	// device that comes back later may still report results it had.
	abandoned bool
	// prep is its device's preparation of its tool, which holds its
	// deadline (preparing.go).
	prep preparation

	// onPreparing, if set, hears each stage of that preparation: the
	// task's events tell it.
	onPreparing func(protocol.Preparing)
}

// sentElsewhere is a command's sending to the node that holds its
// device's link (cluster mode), guarded by dispatcher.mu.
type sentElsewhere struct {
	// lease is the epoch of the device's lease under which it was last
	// sent, or is being sent, there; 0 if it is not out on another node.
	lease int64
	// node is that node, while lease is not 0.
	node string
	// retries counts its sends that found no holder.
	retries int
	// delivered: node answered that it sent it on the device's link.
	delivered bool
	// trouble names the part, NATS or the store, that last kept it from
	// the node holding its device's link, or may keep its results from
	// coming back from there; "" once a node took it.
	trouble string
}

// ResponseID is the command's response_id.
func (c *Command) ResponseID() string { return c.rec.ResponseID }

// result is how cmd ended, once done is closed.
func (c *Command) result() Result {
	r := Result{ResponseID: c.rec.ResponseID, Results: c.results, Recorded: c.recorded, Stopped: c.stopped.Load()}
	if c.fenced {
		r.Err = fmt.Errorf("%s: %w", c.failed, store.ErrAdopted)
	}
	return r
}

func NewDispatcher(st *store.Store, u *unrecorded.Writes, reg *Registry, mx *metrics.Metrics,
	answer func(deviceID string, m *protocol.ClientMessage, err error),
	sessionEnd func(store.Session, store.Command, bool) (store.Session, error), log *slog.Logger, frameCap int64, prepBound time.Duration) *Dispatcher {
	return &Dispatcher{store: st, unrecorded: u, reg: reg, metrics: mx, answer: answer, sessionEnd: sessionEnd, log: log, frameCap: frameCap, prepBound: prepBound,
		remote: SingleNode{}, pending: map[string]*Command{}}
}

// end ends cmd with its outcome: the first call wins. The command is
// counted before whoever waits for it hears, so that what they do next
// (read /metrics, say) sees it.
func (d *Dispatcher) end(cmd *Command, results []protocol.Result, failed string, recorded bool) {
	d.endAs(cmd, results, failed, recorded, false)
}

// endAs is end, for a command that is fenced off or not.
func (d *Dispatcher) endAs(cmd *Command, results []protocol.Result, failed string, recorded, fenced bool) {
	cmd.once.Do(func() {
		d.metrics.CommandEnded(d.toolLabels(cmd.rec.DeviceID, cmd.rec.Actions), results, time.Since(cmd.start))
		cmd.results, cmd.failed, cmd.recorded, cmd.fenced = results, failed, recorded, fenced
		close(cmd.done)
	})
}

// CommandSpec is what a command is for.
type CommandSpec struct {
	DeviceID, SessionID, Actor string
	By                         store.By
	Step, Attempt              int
	// Actions are resolved: they go to the device as they are, with
	// fresh call_ids.
	Actions []protocol.Command
	Tools   []store.ToolRef
	Timeout time.Duration
	// WaitForDevice: see Command.waitForDevice.
	WaitForDevice bool
	// Session, if set, is the row of the session this command alone
	// makes up (a single command from the API). The dispatcher records it
	// in the transaction that records the command, and ends it in the one
	// that records the command's outcome: a single command costs two
	// transactions in all.
	Session *store.Session
	// Fence: see Command.fence.
	Fence *store.Owner
	// Preparing, if set, hears how far the device has come preparing the
	// command's tool, each time it says.
	Preparing func(protocol.Preparing)
}

// NewCommand gives the actions fresh call_ids and the command a fresh
// response_id.
func (d *Dispatcher) NewCommand(spec CommandSpec) *Command {
	actions := make([]protocol.Command, len(spec.Actions))
	callIDs := make([]string, len(actions))
	for i, a := range spec.Actions {
		a.CallID = uuid.NewString()
		actions[i], callIDs[i] = a, a.CallID
	}
	rec := store.Command{
		ResponseID: store.NewRowID(), DeviceID: spec.DeviceID, SessionID: spec.SessionID, Actor: spec.Actor, By: spec.By,
		Step: spec.Step, Attempt: spec.Attempt, Actions: actions, Tools: spec.Tools, Timeout: spec.Timeout, WaitForDevice: spec.WaitForDevice,
	}
	cmd := d.recordedCommand(rec, spec.Session)
	cmd.fence, cmd.onPreparing = spec.Fence, spec.Preparing
	return cmd
}

// recordedCommand is the command rec, for the session row session if it
// alone makes that session up.
func (d *Dispatcher) recordedCommand(rec store.Command, session *store.Session) *Command {
	cmd := &Command{
		rec:     rec,
		msg:     CommandMessage(rec.SessionID, rec.ResponseID, rec.Actions),
		session: session, timeout: rec.Timeout, waitForDevice: rec.WaitForDevice,
		done: make(chan struct{}),
	}
	cmd.log.Init(d.log, cmd.logAttrs)
	return cmd
}

// logAttrs are the attributes of every line logged about c.
func (c *Command) logAttrs() []any {
	return []any{"device", c.rec.DeviceID, "session_id", c.rec.SessionID, "response_id", c.rec.ResponseID,
		"call_id", protocol.JoinCallIDs(protocol.CallIDs(c.rec.Actions))}
}

// CommandMessage is the COMMAND that carries actions.
func CommandMessage(sessionID, responseID string, actions []protocol.Command) *protocol.ServerMessage {
	return &protocol.ServerMessage{
		Type: protocol.ServerCommand, Status: protocol.StatusContinue, Actions: actions,
		SessionID: sessionID, ResponseID: responseID, Timestamp: protocol.Now(),
	}
}

// NotRecorded is a new command that was not recorded, and never will be,
// with the task it alone makes up: this node began to doubt its cluster
// lease (Why) while the command waited for the store. Nothing of it is
// on record, as for work refused before it started.
type NotRecorded struct{ Why string }

func (e *NotRecorded) Error() string { return "command not recorded: " + e.Why }

// errStorage means the command was not sent because it could not be
// recorded: nothing runs unrecorded.
var errStorage = errors.New("storage unavailable")

// Run records cmd (with its session, if it makes one up), sends it and
// waits for its outcome. Every outcome, offline device, timeout and
// storage failure included, ends in one Result per action. When ctx ends
// first, Run returns failures at once (not recorded), but the command goes
// on: its results are recorded whenever they come.
//
// The record is committed before the command is sent, but not fsynced:
// the write that records the command's outcome, which is fsynced before
// anyone hears of it, makes both durable at once. A command that carries
// an Idempotency-Key is the exception: its key must outlive a crash of
// the machine before a repeat can come (RATIONALE.md, "One fsync per
// command").
func (d *Dispatcher) Run(ctx context.Context, cmd *Command) Result {
	cmd.start = time.Now()
	record := d.store.WriteUnsynced
	if cmd.session != nil && cmd.session.Key != nil {
		record = d.store.Write
	}
	if d.IsFrozen() {
		return Result{ResponseID: cmd.rec.ResponseID, Results: protocol.FailAll(protocol.CallIDs(cmd.rec.Actions), ErrHandedOff.Error()),
			Err: ErrHandedOff}
	}
	rctx, stop := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if cmd.session != nil {
		// Nothing of its task is on record before this write: it is given
		// up, never to be recorded, if this node begins to doubt its lease
		// while it waits for the store (a store cut off, a statement hung
		// on the wire), and its caller hears so, as new work does.
		rctx, stop = d.remote.untilDoubt(rctx)
	}
	err := record(rctx, func(tx *store.Tx) error {
		// The session a single command makes up is recorded with it.
		if cmd.fence != nil && cmd.session == nil {
			if err := tx.Sessions().Fence(cmd.rec.SessionID, *cmd.fence); err != nil {
				return err
			}
		}
		if cmd.session != nil {
			if err := tx.Sessions().Insert(*cmd.session); err != nil {
				return err
			}
		}
		return tx.Commands().Insert(cmd.rec)
	})
	why := context.Cause(rctx) // the doubt, if it came first
	stop()
	if err != nil && why != nil && errors.Is(err, why) {
		return Result{ResponseID: cmd.rec.ResponseID, Results: protocol.FailAll(protocol.CallIDs(cmd.rec.Actions), why.Error()),
			Err: &NotRecorded{Why: why.Error()}}
	}
	if err != nil {
		return Result{ResponseID: cmd.rec.ResponseID, Results: protocol.FailAll(protocol.CallIDs(cmd.rec.Actions), err.Error()),
			Err: fmt.Errorf("%w: %w", errStorage, err)}
	}
	if offline := d.park(cmd); offline != "" {
		d.fail(cmd, offline)
	}
	return d.await(ctx, cmd)
}

// Resume sends again, with the same response_id and call_ids, the
// command rec that a node whose session this one adopted recorded and
// may have sent, and waits for its outcome as run does. The agent answers
// a repeat from its outbox and never runs it twice. session is the row
// of the session rec alone makes up, if it does, and fence the owner
// that runs its session; preparing, if set, hears how far the device
// has come preparing its tool. Results recorded
// meanwhile (the device reported them to a node after its own died) end
// it at once.
func (d *Dispatcher) Resume(ctx context.Context, rec store.Command, session *store.Session, fence *store.Owner, preparing func(protocol.Preparing)) Result {
	cmd := d.recordedCommand(rec, session)
	// The node that recorded it may have sent it: it has left, whatever
	// this node does with it.
	cmd.inFlight, cmd.left, cmd.fence, cmd.start, cmd.onPreparing = true, true, fence, time.Now(), preparing
	if offline := d.park(cmd); offline != "" {
		d.fail(cmd, offline)
	} else {
		d.settleIfRecorded(ctx, cmd)
	}
	return d.await(ctx, cmd)
}

// settleIfRecorded ends cmd with its outcome, and the session it alone
// makes up, if the store holds that outcome already.
func (d *Dispatcher) settleIfRecorded(ctx context.Context, cmd *Command) {
	if now, err := d.store.Commands().Get(ctx, cmd.rec.ResponseID); err == nil && now.Status != store.CommandPending {
		d.settle(cmd)
	}
}

// settle ends cmd, whose outcome the store holds already, with it, and
// the session it alone makes up.
func (d *Dispatcher) settle(cmd *Command) { d.fail(cmd, "its outcome is recorded already") }

// await waits for cmd's outcome, or for ctx to end: see run.
func (d *Dispatcher) await(ctx context.Context, cmd *Command) Result {
	select {
	case <-cmd.done:
		if cmd.failed != "" {
			cmd.log.Warn("command failed", "err", cmd.failed)
		} else {
			cmd.log.Info("command done", "status", cmd.result().Status())
		}
		return cmd.result()
	case <-ctx.Done():
		reason := "stopped waiting: " + context.Cause(ctx).Error()
		if d.failUnsent(cmd, reason) {
			cmd.log.Info("caller stopped waiting before the device came back; the command is never sent", "err", context.Cause(ctx))
			return cmd.result()
		}
		cmd.log.Info("caller stopped waiting; the command's results will still be recorded", "err", context.Cause(ctx))
		return Result{ResponseID: cmd.rec.ResponseID, Results: protocol.FailAll(protocol.CallIDs(cmd.rec.Actions), reason)}
	}
}

// park decides, once cmd is recorded, whether it goes to its device now,
// waits for it, or fails at once, and makes it wait for its results
// unless it fails; offline, if not "", is why it fails. This is the one
// place that decides it (RATIONALE.md, "When a command waits for its
// device"), from where the registry says the device is:
//
//   - online: it is sent on the device's link now;
//   - anywhere else, if its caller asked to wait for the device: it waits,
//     unsent, for the device to register again, within its timeout;
//   - between links (its link dropped within its grace): it waits, unsent,
//     for the device to register again, within its timeout and what is
//     left of the grace;
//   - shut down (its agent closed the link on purpose as it stopped): it
//     fails at once, "device X shut down";
//   - anywhere else (not seen since the server started, past its grace):
//     it fails at once, "device X is offline".
//
// The decision and the parking are one step under d.mu: a device that
// registers again afterwards finds the command parked and gets it sent
// (resend), and one whose grace ends afterwards has it abandoned. The
// registry moves a device from online to between links in one step, so
// a link that drops at any moment before, even while the command was
// being recorded, leaves it waiting, never failed.
func (d *Dispatcher) park(cmd *Command) (offline string) {
	id := cmd.rec.DeviceID
	lease, err := d.remote.leaseIfNotHere(id)
	if err != nil {
		return err.Error()
	}
	d.mu.Lock()
	if d.frozen {
		d.mu.Unlock()
		return ErrHandedOff.Error()
	}
	at := d.remote.where(id, d.reg.Reach(id), lease)
	waits := at.Link == nil && at.node == "" && (cmd.waitForDevice || cmd.inFlight || at.GraceLeft > 0)
	if at.Link == nil && at.node == "" && !waits {
		d.mu.Unlock()
		switch {
		case at.refused != "":
			return at.refused
		case at.shutDown:
			return shutDownFailure(id, "")
		}
		return fmt.Sprintf("device %q is offline", id)
	}
	replaced := d.takePlace(cmd)
	cmd.deadline = time.Now().Add(cmd.timeout)
	cmd.timer = time.AfterFunc(cmd.timeout, func() { d.expire(cmd) })
	within := cmd.timeout
	if waits && !cmd.waitForDevice && !cmd.inFlight && at.GraceLeft < cmd.timeout {
		within = at.GraceLeft
		cmd.unsentTimer = time.AfterFunc(at.GraceLeft, func() {
			d.failUnsent(cmd, fmt.Sprintf("device %q is offline and did not register again within its grace", id))
		})
	}
	d.mu.Unlock()
	if replaced != nil {
		d.replaced(replaced)
	}
	switch {
	case at.node != "":
		go d.remote.send(cmd, at.node, at.leaseEpoch)
	case waits:
		cmd.log.Info("device is offline; the command waits for it to register again", "within", within)
	default:
		d.send(cmd, at.Link, false)
	}
	return ""
}

// takePlace makes cmd the command waiting here for its response_id, under
// d.mu, and returns the one it replaces, if any: the same command, still
// waiting for an earlier run of its session that this node no longer
// owns. That happens when the node adopts a session it was running itself
// under an epoch it has lost (its lease lost and taken again), or one
// handed back to it: the adopter's copy, resumed, is the one that waits,
// is sent and is answered. It carries on from where the other was sent,
// so that it goes out again only where that one did not.
func (d *Dispatcher) takePlace(cmd *Command) (replaced *Command) {
	rid := cmd.rec.ResponseID
	replaced = d.pending[rid]
	d.pending[rid] = cmd
	if replaced == nil || replaced == cmd {
		return nil
	}
	cmd.sentOn, cmd.sent, cmd.left, cmd.elsewhere = replaced.sentOn, replaced.sent, cmd.left || replaced.left, replaced.elsewhere
	return replaced
}

// replaced ends cmd, which a resumed copy replaced (takePlace), at once,
// recording nothing: its session is another run's now, which carries the
// command on, and its caller hears that how it ends is not known to it,
// never that it failed.
func (d *Dispatcher) replaced(cmd *Command) {
	d.forget(cmd)
	why := "command resumed by the run of its session that this node adopted; how it ends is that run's"
	cmd.log.Warn("command resumed by an adopted run of its session here; this run stops waiting for it")
	d.endAs(cmd, protocol.FailAll(protocol.CallIDs(cmd.rec.Actions), why), why, false, true)
}

// shutDownFailure is why a command for device id fails when its agent
// stopped on purpose: when, and how to wait for it instead.
func shutDownFailure(id, when string) string {
	return fmt.Sprintf("device %q shut down%s (its agent stopped); to wait for it to come back, send the command with "+
		"wait_for_device (aipctl exec --wait-for-device)", id, when)
}

// failUnsent fails cmd, durably, if it was never sent, so that it never
// will be, and reports whether it did.
func (d *Dispatcher) failUnsent(cmd *Command, reason string) bool {
	d.mu.Lock()
	unsent := !cmd.sent && d.pending[cmd.rec.ResponseID] == cmd
	if unsent {
		delete(d.pending, cmd.rec.ResponseID)
	}
	d.mu.Unlock()
	if unsent {
		d.fail(cmd, reason)
	}
	return unsent
}

// send writes cmd on c unless it was already sent there. A failed send
// leaves the command waiting for the device to register again, unless the
// command is too big for a frame: it could never be sent, so it fails at
// once, saying so.
func (d *Dispatcher) send(cmd *Command, c *Link, resend bool) {
	d.mu.Lock()
	if cmd.sentOn == c || d.pending[cmd.rec.ResponseID] != cmd {
		d.mu.Unlock()
		return
	}
	if cmd.abandoned {
		d.mu.Unlock()
		cmd.log.Info("command not sent again: its device came back after its grace")
		return
	}
	cmd.sentOn, cmd.sent, cmd.left = c, true, true
	d.mu.Unlock()

	err := c.Conn.SendWithin(SendTimeout, cmd.msg)
	if errors.Is(err, protocol.ErrTooBig) {
		d.tooBig(cmd, c, err)
		return
	}
	if err != nil {
		d.mu.Lock()
		if cmd.sentOn == c {
			cmd.sentOn = nil
		}
		d.mu.Unlock()
		cmd.log.Warn("command not sent; waiting for the device to come back", "err", err)
		return
	}
	if resend {
		cmd.log.Info("command sent again on the device's new link", "actions", len(cmd.rec.Actions))
	} else {
		// At debug: "command done" is the command's one line at info.
		cmd.log.Debug("command sent", "actions", len(cmd.rec.Actions), "timeout", cmd.timeout)
	}
}

// Stop asks the device that command responseID was sent to to stop it,
// why being the cause it records, if the command is waiting and was sent:
// on this node's link, or, in cluster mode, through the node holding the
// device's link. Only the CBOR wire carries CANCEL_COMMAND: on UFO's
// JSON wire the command runs on, and its late results are recorded. One
// not sent yet is never sent once its session has ended.
func (d *Dispatcher) Stop(responseID, why string) {
	d.mu.Lock()
	cmd := d.pending[responseID]
	var c *Link
	var lease int64
	if cmd != nil {
		c, lease = cmd.sentOn, cmd.elsewhere.lease
		cmd.stopped.Store(true)
	}
	d.mu.Unlock()
	m := &protocol.ServerMessage{Type: protocol.ServerCancelCommand, Status: protocol.StatusOK, ResponseID: responseID, Error: why, Timestamp: protocol.Now()}
	switch {
	case c != nil:
		if err := sendCancel(c, m); err != nil {
			d.log.Warn("cancel not sent to the device", "device", c.ID, "response_id", responseID, "err", err)
		}
	case lease != 0:
		d.remote.stop(cmd.rec.DeviceID, lease, m)
	}
}

// sendCancel sends CANCEL_COMMAND m on c, if its wire carries it.
func sendCancel(c *Link, m *protocol.ServerMessage) error {
	if c.Conn.Encoding() != protocol.CBOR {
		return nil
	}
	return c.Conn.SendWithin(SendTimeout, m)
}

// tooBig fails cmd, which c's link refused as larger than a frame (err).
// Admission refuses such a command before it is recorded; one gets here
// when its device came back on a wire in which it is larger than it was
// measured.
func (d *Dispatcher) tooBig(cmd *Command, c *Link, err error) {
	size, merr := FrameSize(c.Conn.Encoding(), cmd.msg)
	if merr != nil {
		d.fail(cmd, fmt.Sprintf("command not sent: %v", err))
		return
	}
	d.fail(cmd, "command not sent: "+FrameTooBig(size, c.Conn.Encoding(), d.frameCap))
}

// Resend sends every command still waiting on c's device on its new link,
// with the same response_id and call_ids.
func (d *Dispatcher) Resend(c *Link) {
	d.mu.Lock()
	var todo []*Command
	for _, cmd := range d.pending {
		if cmd.rec.DeviceID == c.ID && cmd.sentOn != c {
			todo = append(todo, cmd)
		}
	}
	d.mu.Unlock()
	for _, cmd := range todo {
		d.send(cmd, c, true)
	}
}

// LinkDropped marks the commands sent on c as waiting for the device to
// come back. They fail only when their own timeout ends; unless the
// device shut down (its agent closed the link on purpose as it stopped,
// having answered what it took): then those whose caller did not ask to
// wait for it fail at once.
func (d *Dispatcher) LinkDropped(c *Link, shutDown bool) {
	d.mu.Lock()
	var gone []*Command
	for _, cmd := range d.pending {
		if cmd.sentOn != c {
			continue
		}
		cmd.sentOn = nil
		if shutDown && !cmd.waitForDevice {
			gone = append(gone, cmd)
			continue
		}
		cmd.log.Info("link dropped; the command waits for the device to come back", "within", cmd.timeout)
	}
	d.mu.Unlock()
	for _, cmd := range gone {
		d.fail(cmd, shutDownFailure(c.ID, " before it answered"))
	}
}

// expire fails cmd when its timeout ends, unless its results won the
// race, or its device's word that it prepares the tool moved the
// deadline on as the timer fired (preparing.go reset the timer).
func (d *Dispatcher) expire(cmd *Command) {
	d.mu.Lock()
	if time.Now().Before(cmd.deadline) {
		d.mu.Unlock()
		return
	}
	why := cmd.timedOut()
	d.mu.Unlock()
	d.fail(cmd, why)
}

// timedOut is why cmd failed when its timeout ended, from where it was
// then (under dispatcher.mu): out on a link here, out on another node
// that holds its device's link, or waiting for its device to come back.
// A command that left this node may still run: it says so (server
// RATIONALE.md, "A command's deadline").
func (cmd *Command) timedOut() string {
	why := cmd.whyTimedOut()
	if cmd.left {
		why += "; " + MayStillRun
	}
	return why
}

// MayStillRun ends the failure of a command that timed out after it left
// the node that took it: it may have reached its device.
const MayStillRun = "it may still run on the device: a late outcome is recorded on its task"

func (cmd *Command) whyTimedOut() string {
	id := cmd.rec.DeviceID
	out := cmd.elsewhere
	switch {
	case cmd.prep.under():
		return cmd.prep.overBound(id, cmd.timeout)
	case cmd.sentOn != nil:
		return fmt.Sprintf("device %q did not answer within %s", id, cmd.timeout)
	case out.lease != 0 && !out.delivered:
		return fmt.Sprintf("command for device %q not confirmed sent within %s: NATS: node %q, which holds the device's link, did not answer over NATS",
			id, cmd.timeout, out.node)
	case out.lease != 0 && out.trouble != "":
		return fmt.Sprintf("device %q, linked to node %q, did not answer within %s as far as this node heard: %s", id, out.node, cmd.timeout, out.trouble)
	case out.lease != 0:
		return fmt.Sprintf("device %q, linked to node %q, did not answer within %s", id, out.node, cmd.timeout)
	case out.trouble != "" && cmd.left:
		return fmt.Sprintf("command for device %q not confirmed sent within %s: %s", id, cmd.timeout, out.trouble)
	case out.trouble != "":
		return fmt.Sprintf("command for device %q not sent within %s: %s", id, cmd.timeout, out.trouble)
	case !cmd.left:
		return fmt.Sprintf("command for device %q not sent within %s: the device did not come back", id, cmd.timeout)
	case cmd.inFlight && !cmd.sent:
		return fmt.Sprintf("command for device %q, resumed here from the node that recorded it and may have sent it, not answered within %s: the device did not come back",
			id, cmd.timeout)
	}
	return fmt.Sprintf("link to device %q dropped and the device did not come back within %s", id, cmd.timeout)
}

// Refused fails at once a command its device answered with an ERROR m,
// such as a frame it could not decode: it will not run it, so waiting for
// its results would only end in a misleading timeout. An ERROR about a
// command that is not waiting on this device changes nothing.
func (d *Dispatcher) Refused(ctx context.Context, c *Link, m *protocol.ClientMessage) {
	rid := m.PrevResponseID
	cmd := d.waiting(rid)
	if cmd == nil || cmd.rec.DeviceID != c.ID {
		if d.remote.refusedHere(c.ID, rid, m.Error) {
			return
		}
		storedCommandLog(ctx, d.store, d.log, c.ID, rid, m.SessionID).Warn("device reported an error about a command not waiting on it", "error", m.Error)
		return
	}
	cmd.log.Warn("device refused the command", "error", m.Error)
	d.fail(cmd, fmt.Sprintf("device %q refused the command: %s", c.ID, m.Error))
}

// storedCommandLog is log naming the command responseID that device
// deviceID spoke of: by its recorded ids if the store has it, else by the
// session the device named.
func storedCommandLog(ctx context.Context, st *store.Store, log *slog.Logger, deviceID, responseID, sessionID string) *slog.Logger {
	calls := ""
	if rec, err := st.Commands().Get(ctx, responseID); err == nil {
		sessionID, calls = rec.SessionID, protocol.JoinCallIDs(protocol.CallIDs(rec.Actions))
	}
	return log.With("device", deviceID, "session_id", sessionID, "response_id", responseID, "call_id", calls)
}

// fail ends cmd without device results, durably, or as soon as the
// store can take it. If the device's results were recorded first, they
// stand.
func (d *Dispatcher) fail(cmd *Command, reason string) {
	d.forget(cmd)
	if d.IsFrozen() {
		d.end(cmd, protocol.FailAll(protocol.CallIDs(cmd.rec.Actions), reason), reason, false)
		return
	}
	var rec store.Command
	finished := false
	err := d.unrecorded.Record(context.Background(), unrecorded.Write{What: "failure of command " + cmd.rec.ResponseID, Size: unrecorded.FailureBytes,
		Fn: func(tx *store.Tx) (err error) {
			if cmd.fence != nil {
				if err := tx.Sessions().Fence(cmd.rec.SessionID, *cmd.fence); err != nil {
					return err
				}
			}
			rec, err = tx.Commands().Fail(cmd.rec.ResponseID, reason)
			// The device's results were recorded first: they stand. The
			// write that recorded them may not have known cmd (it was
			// forgotten just above), so end its session here if it has not
			// ended. (Set on every run: the store may run a write again.)
			if finished = errors.Is(err, store.ErrFinished); finished {
				err = nil
			}
			if err != nil {
				return err
			}
			return d.endSession(tx, cmd.session, rec, cmd.stopped.Load())
		}})
	switch {
	case errors.Is(err, store.ErrAdopted):
		cmd.log.Warn("command failure not recorded: another node adopted its session and runs it on", "failure", reason)
		d.endAs(cmd, protocol.FailAll(protocol.CallIDs(cmd.rec.Actions), reason), reason, false, true)
	case err != nil:
		cmd.log.Error("command failure not recorded", "err", err, "failure", reason, "kept", errors.Is(err, store.ErrUnavailable))
		d.end(cmd, protocol.FailAll(protocol.CallIDs(cmd.rec.Actions), reason), reason, false)
	case finished:
		d.end(cmd, rec.Results, "", true)
	default:
		d.end(cmd, rec.Results, reason, true)
	}
}

// endSession ends session, the row of the session a command alone makes
// up, if there is one, with the outcome rec that tx records, stopped if
// its task was cancelled; a session that has already ended keeps its
// end. The session's row is on record: run recorded it with its command,
// before the command could have any outcome.
func (d *Dispatcher) endSession(tx *store.Tx, session *store.Session, rec store.Command, stopped bool) error {
	if session == nil {
		return nil
	}
	row, err := d.sessionEnd(*session, rec, stopped)
	if err != nil {
		return err
	}
	return tx.Sessions().EndRecorded(row)
}

// waiting is the command responseID if it still waits for its outcome,
// or nil.
func (d *Dispatcher) waiting(responseID string) *Command {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pending[responseID]
}

func (d *Dispatcher) forget(cmd *Command) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pending[cmd.rec.ResponseID] == cmd {
		delete(d.pending, cmd.rec.ResponseID)
	}
	if cmd.timer != nil {
		cmd.timer.Stop()
	}
	if cmd.unsentTimer != nil {
		cmd.unsentTimer.Stop()
	}
}

// Abandon keeps every command waiting on a device whose grace ended from
// being sent again: the sessions that asked for them are cancelled, and a
// device that comes back must not run them then. Each still waits out its
// timeout for results the device may have had before its link dropped.
func (d *Dispatcher) Abandon(deviceID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, cmd := range d.pending {
		if cmd.rec.DeviceID == deviceID && !cmd.waitForDevice {
			cmd.abandoned = true
		}
	}
}

// FailDevice fails at once every command waiting on a device that will
// not come back (it was revoked).
func (d *Dispatcher) FailDevice(deviceID, reason string) {
	d.mu.Lock()
	var todo []*Command
	for _, cmd := range d.pending {
		if cmd.rec.DeviceID == deviceID {
			todo = append(todo, cmd)
		}
	}
	d.mu.Unlock()
	for _, cmd := range todo {
		d.fail(cmd, reason)
	}
}

// ErrHandedOff: the node handed its sessions off to the others as it
// drains; their commands go on there.
var ErrHandedOff = errors.New("this node is draining: its tasks go on on another node")

func (d *Dispatcher) IsFrozen() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.frozen
}

// Freeze stops every command here without recording anything, for a node
// that hands its sessions off: each one waiting ends at once, unrecorded,
// and is left pending in the store for the node that adopts its session
// to send again; none is recorded, sent or failed from now on. Results
// devices report are still recorded, for the adopter to find.
func (d *Dispatcher) Freeze() {
	d.mu.Lock()
	d.frozen = true
	d.mu.Unlock()
	for _, cmd := range d.allWaiting() {
		d.forget(cmd)
		d.end(cmd, protocol.FailAll(protocol.CallIDs(cmd.rec.Actions), ErrHandedOff.Error()), ErrHandedOff.Error(), false)
	}
}

// Shutdown fails every waiting command, for a server that is stopping.
// Their results can still be recorded after a restart.
func (d *Dispatcher) Shutdown() {
	for _, cmd := range d.allWaiting() {
		d.fail(cmd, "server shut down while waiting for results")
	}
}

// allWaiting is every command waiting now, for a caller that ends them
// outside the lock.
func (d *Dispatcher) allWaiting() []*Command {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Collect(maps.Values(d.pending))
}

// DeliveryError is COMMAND_RESULTS the server refuses; the device should
// not send them again.
type DeliveryError struct{ msg string }

func (e *DeliveryError) Error() string { return e.msg }

// Deliver records a device's COMMAND_RESULTS exactly once and hands them
// to whoever waits. A nil error means the results are durable (or were
// already): the device may forget them. A *deliveryError means they can
// never be accepted. errKept means the store could not take them now:
// they are kept, the device hears how they ended once it does (answer),
// and whoever waits hears at once that the server could not record them.
// Any other error is the server's: the device should send them again
// later.
func (d *Dispatcher) Deliver(c *Link, m *protocol.ClientMessage) error {
	rid := m.PrevResponseID
	if rid == "" {
		return &DeliveryError{`command_results: field "prev_response_id": missing`}
	}
	dropImplausibleUsage(m.ActionResults, lazylog.New(d.log, func() []any {
		return []any{"device", c.ID, "session_id", m.SessionID, "response_id", rid}
	}))
	// The write that records the results of a command still waiting for
	// them also ends the session the command alone makes up; it knows the
	// command's record, which it need not read back. So does it for a
	// command another node sent here with its session (cluster mode): one
	// durable write, as for a command asked here.
	waiting := d.waiting(rid)
	var session *store.Session
	var stopped func() bool
	if waiting != nil {
		session, stopped = waiting.session, waiting.stopped.Load
	} else {
		session, stopped = d.remote.proxiedSession(rid)
	}
	var rec store.Command
	err := d.store.Write(context.Background(), func(tx *store.Tx) (err error) {
		if waiting == nil {
			rec, err = tx.Commands().RecordResults(c.ID, rid, m.ActionResults)
		} else {
			rec, err = tx.Commands().RecordSentResults(waiting.rec, c.ID, m.ActionResults)
		}
		if err != nil {
			return err
		}
		return d.endSession(tx, session, rec, stopped())
	})
	if errors.Is(err, store.ErrUnavailable) {
		return d.keepResults(c.ID, m, err)
	}
	return d.recorded(c.ID, m, rec, err, session != nil)
}

// errKept: results the store could not take now, kept until it does.
var errKept = errors.New("results kept until the store takes them")

// keepResults keeps results m that the store could not take (cause), to
// record them as soon as it can, and fails the command that waits for
// them at once, saying why: its caller is not left to wait out the
// timeout and hear "did not answer". The results then come late, as
// they would after a timeout. Past the bound on kept writes they are not
// kept: the device keeps them, unacknowledged, and sends them again after
// it next registers.
func (d *Dispatcher) keepResults(deviceID string, m *protocol.ClientMessage, cause error) error {
	rid := m.PrevResponseID
	log := d.log.With("device", deviceID, "session_id", m.SessionID, "response_id", rid,
		"call_id", protocol.JoinCallIDs(protocol.ResultCallIDs(m.ActionResults)))
	size := resultsBytes(m.ActionResults)
	then := "it keeps them and records them once it can"
	if !d.unrecorded.HasRoom(2, size+unrecorded.FailureBytes) {
		then = "the device keeps them and sends them again when it next registers"
	}
	why := fmt.Sprintf("%v; %s", store.UnavailableCause(cause), then)
	if cmd := d.waiting(rid); cmd != nil {
		// Its failure goes first, so that the results come late, after it.
		d.fail(cmd, fmt.Sprintf("device %q answered, but the server could not record its results: %s", deviceID, why))
	} else {
		d.remote.unrecordedHere(deviceID, rid, why)
	}
	var rec store.Command
	kept := d.unrecorded.Keep(unrecorded.Write{What: "results of command " + rid, Key: "results " + rid, Size: size,
		Fn: func(tx *store.Tx) (err error) {
			rec, err = tx.Commands().RecordResults(deviceID, rid, m.ActionResults)
			return err
		},
		Recorded: func(err error) { d.answer(deviceID, m, d.recorded(deviceID, m, rec, err, false)) },
	}, cause)
	if !kept {
		log.Error("results not recorded; the device keeps them", "err", cause)
		return cause
	}
	log.Error("results not recorded yet: kept until the store takes them", "err", cause)
	return errKept
}

// resultsBytes is about what results take to record.
func resultsBytes(results []protocol.Result) int64 {
	b, _ := json.Marshal(results)
	return int64(len(b))
}

// recorded finishes the delivery of results m whose write ended with
// rec and err, having ended the command's session if sessionEnded, and
// returns deliver's error for them.
func (d *Dispatcher) recorded(deviceID string, m *protocol.ClientMessage, rec store.Command, err error, sessionEnded bool) error {
	rid := m.PrevResponseID
	log := lazylog.New(d.log, func() []any {
		// The command's ids when it is known; else those the device sent.
		sessionID, calls := rec.SessionID, protocol.JoinCallIDs(protocol.CallIDs(rec.Actions))
		if rec.ResponseID == "" {
			sessionID, calls = m.SessionID, protocol.JoinCallIDs(protocol.ResultCallIDs(m.ActionResults))
		}
		return []any{"device", deviceID, "session_id", sessionID, "response_id", rid, "call_id", calls}
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		log.Warn("results refused: no such command")
		return &DeliveryError{fmt.Sprintf("command_results for response_id %q: no such command", rid)}
	case errors.Is(err, store.ErrWrongDevice):
		log.Warn("results refused: the command went to another device", "sent_to", rec.DeviceID)
		return &DeliveryError{fmt.Sprintf("command_results for response_id %q: that command was not sent to %q", rid, deviceID)}
	case errors.Is(err, store.ErrDuplicate):
		log.Info("repeated results ignored: already recorded")
		d.remote.recordedHere(rec, false)
		// A command sent again by a node that adopted its session may
		// wait here for results another node recorded.
		if cmd := d.waiting(rid); cmd != nil {
			d.settle(cmd)
		}
		return nil
	case err != nil:
		log.Error("results not recorded", "err", err)
		return err
	}
	log.Debug("results recorded", "late", rec.Late)
	d.metrics.ResultsRecorded(d.toolLabels(deviceID, rec.Actions), rec.Results, rec.Late)
	// Whoever waits hears of them only if the command still waits: one
	// that failed meanwhile (fail forgets it before recording the failure)
	// keeps the failure it reported, as the store does.
	if cmd := d.waiting(rid); cmd != nil {
		d.forget(cmd)
		d.end(cmd, rec.Results, "", true)
		return nil
	}
	d.remote.recordedHere(rec, sessionEnded)
	return nil
}

// toolLabels are the metric labels of actions sent to a device: each
// tool's name if the device lists it, else metrics.UnknownTool, so that a
// name an operator mistyped does not become a series of its own.
func (d *Dispatcher) toolLabels(deviceID string, actions []protocol.Command) []string {
	tools := d.Tools(deviceID).Tools
	labels := make([]string, len(actions))
	for i, a := range actions {
		labels[i] = metrics.UnknownTool
		if _, found := FindTool(tools, "", a.ToolName, a.ToolType); found {
			labels[i] = a.ToolName
		}
	}
	return labels
}

// DeviceTools is what the server knows now of a device's tools.
type DeviceTools struct {
	// Online: the device is linked here, on a link of Encoding.
	Online   bool
	Encoding protocol.Encoding
	// Tools are those of its live registration, or of its last one while
	// it is not linked here.
	Tools []protocol.MCPToolInfo
}

// Tools is what the server knows now of device id's tools.
func (d *Dispatcher) Tools(id string) DeviceTools {
	var t DeviceTools
	var info *protocol.SystemInfo
	if c := d.reg.Device(id); c != nil {
		t.Online, t.Encoding = true, c.Conn.Encoding()
		info = c.Info.Load()
	} else if dev, err := d.store.Devices().Get(context.Background(), id); err == nil {
		info = StoredInfo(dev)
	}
	if info != nil {
		t.Tools = info.Tools
	}
	return t
}

// Registry is where the devices linked here are.
func (d *Dispatcher) Registry() *Registry { return d.reg }

// Leases are the cluster's leases on devices, as the gateway takes and
// gives them up and the API's views ask about them: a single node's
// hold none.
func (d *Dispatcher) Leases() DeviceLeases { return d.remote }
