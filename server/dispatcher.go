package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/google/uuid"
)

// dispatcher sends COMMAND messages and resolves each with its device's
// COMMAND_RESULTS, a timeout, or a dropped link: every command ends in one
// Result per action.
type dispatcher struct {
	store *store.Store
	reg   *registry
	log   *slog.Logger
	stop  <-chan struct{} // closed at server shutdown

	mu      sync.Mutex
	pending map[string]*future // by response_id
}

// future is a command waiting for its results.
type future struct {
	device *deviceConn
	done   chan struct{}
	once   sync.Once
	// Exactly one of these is set when done is closed.
	results []protocol.Result
	err     error
}

func (f *future) resolve(results []protocol.Result, err error) {
	f.once.Do(func() {
		f.results, f.err = results, err
		close(f.done)
	})
}

func newDispatcher(st *store.Store, reg *registry, log *slog.Logger, stop <-chan struct{}) *dispatcher {
	return &dispatcher{store: st, reg: reg, log: log, stop: stop, pending: map[string]*future{}}
}

// errStorage means the command was not sent because it could not be
// recorded: nothing runs unrecorded.
var errStorage = errors.New("storage unavailable")

// run sends actions to a device and waits at most timeout for the results.
// Only a storage failure is an error; every other outcome, offline device
// and timeout included, is in the Results. The wait does not end with ctx:
// a caller that gives up does not stop the results being recorded.
func (d *dispatcher) run(ctx context.Context, deviceID, sessionID string, actions []protocol.Command, timeout time.Duration) (api.CommandResponse, error) {
	actions = withCallIDs(actions)
	msg := &protocol.ServerMessage{
		Type:       protocol.ServerCommand,
		Status:     protocol.StatusContinue,
		Actions:    actions,
		SessionID:  sessionID,
		ResponseID: uuid.NewString(),
		Timestamp:  protocol.Now(),
	}
	if msg.SessionID == "" {
		msg.SessionID = uuid.NewString()
	}
	resp := api.CommandResponse{ResponseID: msg.ResponseID, SessionID: msg.SessionID, DeviceID: deviceID}
	log := d.log.With("device", deviceID, "session_id", msg.SessionID, "response_id", msg.ResponseID)

	actionsJSON, _ := json.Marshal(actions)
	rec := store.Command{ResponseID: msg.ResponseID, DeviceID: deviceID, SessionID: msg.SessionID, Actions: actionsJSON}
	if err := d.store.InsertCommand(ctx, rec); err != nil {
		return resp, fmt.Errorf("%w: %w", errStorage, err)
	}
	results, waitErr := d.exchange(ctx, deviceID, msg, timeout)
	if waitErr != nil {
		log.Warn("command failed", "err", waitErr)
		results = failAll(actions, waitErr)
	} else {
		results = matchResults(actions, results)
	}
	resp.Results, resp.Status = results, overallStatus(results)
	resultsJSON, _ := json.Marshal(results)
	if err := d.store.FinishCommand(context.WithoutCancel(ctx), msg.ResponseID, resultsJSON, errText(waitErr)); err != nil {
		log.Error("results not recorded", "err", err)
		return resp, fmt.Errorf("%w: %w", errStorage, err)
	}
	log.Info("command done", "status", resp.Status, "actions", len(actions))
	return resp, nil
}

// exchange sends msg and waits for the device's results.
func (d *dispatcher) exchange(ctx context.Context, deviceID string, msg *protocol.ServerMessage, timeout time.Duration) ([]protocol.Result, error) {
	dc := d.reg.get(deviceID)
	if dc == nil {
		return nil, fmt.Errorf("device %q is offline", deviceID)
	}
	f := &future{device: dc, done: make(chan struct{})}
	d.mu.Lock()
	d.pending[msg.ResponseID] = f
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.pending, msg.ResponseID)
		d.mu.Unlock()
	}()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(timeout, 10*time.Second))
	err := dc.conn.Send(sctx, msg)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("link to device %q dropped while sending the command: %w", deviceID, err)
	}
	select {
	case <-f.done:
		return f.results, f.err
	case <-timer.C:
		return nil, fmt.Errorf("device %q did not answer within %s", deviceID, timeout)
	case <-d.stop:
		return nil, errors.New("server shut down while waiting for results")
	}
}

// resolve delivers COMMAND_RESULTS from dc. Results for a command that was
// sent to another device are refused.
func (d *dispatcher) resolve(dc *deviceConn, m *protocol.ClientMessage) error {
	d.mu.Lock()
	f := d.pending[m.PrevResponseID]
	d.mu.Unlock()
	if f == nil {
		d.log.Warn("results for no pending command", "device", dc.id, "response_id", m.PrevResponseID)
		return nil
	}
	if f.device.id != dc.id {
		return fmt.Errorf("command_results for response_id %q: that command was not sent to %q", m.PrevResponseID, dc.id)
	}
	f.resolve(m.ActionResults, nil)
	return nil
}

// linkDropped fails at once every command waiting on dc.
func (d *dispatcher) linkDropped(dc *deviceConn) {
	err := fmt.Errorf("link to device %q dropped while waiting for results", dc.id)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range d.pending {
		if f.device == dc {
			f.resolve(nil, err)
		}
	}
}

// withCallIDs gives each action a fresh call_id.
func withCallIDs(actions []protocol.Command) []protocol.Command {
	out := make([]protocol.Command, len(actions))
	for i, a := range actions {
		a.CallID = uuid.NewString()
		out[i] = a
	}
	return out
}

func failAll(actions []protocol.Command, err error) []protocol.Result {
	out := make([]protocol.Result, len(actions))
	for i, a := range actions {
		out[i] = protocol.Result{Status: protocol.ResultFailure, Error: err.Error(), CallID: a.CallID}
	}
	return out
}

// matchResults orders the device's results by the actions' call_ids; an
// action the device did not answer gets a failure.
func matchResults(actions []protocol.Command, got []protocol.Result) []protocol.Result {
	byCall := make(map[string]protocol.Result, len(got))
	for _, r := range got {
		byCall[r.CallID] = r
	}
	out := make([]protocol.Result, len(actions))
	for i, a := range actions {
		r, ok := byCall[a.CallID]
		if !ok {
			r = protocol.Result{Status: protocol.ResultFailure, Error: "device returned no result for this action", CallID: a.CallID}
		}
		out[i] = r
	}
	return out
}

func overallStatus(results []protocol.Result) string {
	for _, r := range results {
		if r.Status != protocol.ResultSuccess {
			return string(protocol.ResultFailure)
		}
	}
	return string(protocol.ResultSuccess)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
