package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/plan"
)

// fleetSpec is what a fleet runs its plan on, and how.
type fleetSpec struct {
	labels map[string]string
	// selector picks the devices: the labels, narrowed by the
	// requester's scope.
	selector     access.Selector
	devices      []string // in the order they start
	concurrency  int
	abortPercent int
}

// fleetRunner runs a plan on many devices, each as a child session of
// the fleet's own, at most concurrency at once. Once abortPercent of the
// devices have failed it starts no more; those running finish. Cancelling
// the fleet cancels its running children. See RATIONALE.md, "Fleets".
type fleetRunner struct {
	m     *SessionManager
	fleet *Session
	plan  *plan.Plan
	spec  fleetSpec
	// prior are, for a fleet adopted from another node, its devices'
	// tasks that node started, by device: they are waited for, not
	// started again. Fixed before the fleet starts.
	prior map[string]store.Session

	mu  sync.Mutex
	res api.FleetResult // Devices in spec.devices' order
}

func newFleetRunner(m *SessionManager, fleet *Session, p *plan.Plan, spec fleetSpec) *fleetRunner {
	res := api.FleetResult{Labels: spec.labels, Concurrency: spec.concurrency, AbortPercent: spec.abortPercent,
		Devices: make([]api.FleetDevice, len(spec.devices))}
	for i, id := range spec.devices {
		res.Devices[i] = api.FleetDevice{DeviceID: id, State: api.StatePending}
	}
	return &fleetRunner{m: m, fleet: fleet, plan: p, spec: spec, res: res}
}

func (f *fleetRunner) run(ctx context.Context, _ stepper) outcome[api.FleetResult] {
	slots := make(chan struct{}, f.spec.concurrency)
	var wg sync.WaitGroup
	for i, dev := range f.spec.devices {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			f.skipFrom(i, false)
			break
		}
		if f.abortReached() {
			f.skipFrom(i, true)
			break
		}
		wg.Go(func() {
			// The device's outcome is counted before its slot is freed,
			// so that the abort check that slot unblocks sees it.
			defer func() { <-slots }()
			f.runDevice(ctx, i, dev)
		})
	}
	wg.Wait()
	return f.outcome()
}

// runDevice runs the plan on one device as a child session and waits for
// it to end.
func (f *fleetRunner) runDevice(ctx context.Context, i int, dev string) {
	if prior, ok := f.prior[dev]; ok {
		f.rejoin(ctx, i, prior)
		return
	}
	child, _, err := f.m.getOrCreateSession(context.WithoutCancel(ctx), SessionSpec{
		ID: store.NewRowID(), TaskName: f.fleet.TaskName, DeviceID: dev, ParentID: f.fleet.ID,
		Requester: f.fleet.Requester, Scope: f.fleet.scope, Plan: f.plan, PlanJSON: f.fleet.planJSON, Tee: f.forward,
	})
	if err != nil {
		f.deviceEnded(i, "", api.StateFailed, err.Error())
		return
	}
	f.set(i, child.ID, api.StateRunning, "")
	f.fleet.events.Add(api.TaskEvent{Type: api.EventDeviceStart, SessionID: child.ID, DeviceID: dev, Steps: child.steps})
	stop := context.AfterFunc(ctx, func() { f.cancelChild(child) })
	out := f.m.runPlan(child, nil)
	stop()
	f.deviceEnded(i, child.ID, out.state, out.err)
}

// cancelChild cancels a running child because its fleet was cancelled,
// for the fleet's reason: on request, its device stops the command it
// runs, as for a task cancelled on its own.
func (f *fleetRunner) cancelChild(child *Session) {
	reason := f.fleet.cancelReason()
	if reason == reasonUserRequested {
		f.m.cancelOnRequest(child, "its fleet "+f.fleet.ID+" was cancelled")
		return
	}
	f.m.cancelSession(child, reason)
}

// rejoin waits for the task child, which the node the fleet was adopted
// from started on device i, to end: it runs here, adopted with the fleet,
// or has ended.
func (f *fleetRunner) rejoin(ctx context.Context, i int, child store.Session) {
	f.set(i, child.ID, api.StateRunning, "")
	f.fleet.events.Add(api.TaskEvent{Type: api.EventDeviceStart, SessionID: child.ID, DeviceID: child.DeviceID, Steps: len(f.plan.Steps)})
	if live := f.m.liveSession(child.ID); live != nil {
		stop := context.AfterFunc(ctx, func() { f.cancelChild(live) })
		<-live.done
		stop()
	}
	row, err := f.m.ended(context.WithoutCancel(ctx), child.ID, nil)
	if err != nil {
		f.deviceEnded(i, child.ID, api.StateFailed, err.Error())
		return
	}
	f.deviceEnded(i, child.ID, api.TaskState(row.State), row.Error)
}

// fleetRecord is what a fleet runs on, as its row records it
// (store.Session.Fleet): what a node that adopts it needs.
type fleetRecord struct {
	Labels       map[string]string `json:"labels"`
	Devices      []string          `json:"devices"`
	Concurrency  int               `json:"concurrency"`
	AbortPercent int               `json:"abort_percent"`
}

// record is spec as its row records it.
func (spec fleetSpec) record() json.RawMessage {
	b, _ := json.Marshal(fleetRecord{Labels: spec.labels, Devices: spec.devices, Concurrency: spec.concurrency,
		AbortPercent: spec.abortPercent}) // strings and ints always encode
	return b
}

// recordedFleet is the spec of the fleet row records.
func recordedFleet(row store.Session) (fleetSpec, error) {
	var rec fleetRecord
	if err := json.Unmarshal(row.Fleet, &rec); err != nil {
		return fleetSpec{}, fmt.Errorf("fleet %q: what it runs on: %w", row.ID, err)
	}
	spec := fleetSpec{labels: rec.Labels, devices: rec.Devices, concurrency: rec.Concurrency, abortPercent: rec.AbortPercent}
	if row.Selector != "" {
		if err := json.Unmarshal([]byte(row.Selector), &spec.selector); err != nil {
			return fleetSpec{}, fmt.Errorf("fleet %q: its selector: %w", row.ID, err)
		}
	}
	if spec.concurrency <= 0 {
		return fleetSpec{}, fmt.Errorf("fleet %q: concurrency %d recorded", row.ID, spec.concurrency)
	}
	return spec, nil
}

// forward passes a child's step events, and its devices' preparations,
// on to the fleet's stream, without their results: those stay in the
// child's own task.
func (f *fleetRunner) forward(e api.TaskEvent) {
	if e.Type != api.EventStepStart && e.Type != api.EventStepEnd && e.Type != api.EventPreparing {
		return
	}
	e.Results = nil
	f.fleet.events.Add(e)
}

func (f *fleetRunner) set(i int, sessionID string, state api.TaskState, errText string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := &f.res.Devices[i]
	d.SessionID, d.State, d.Error = sessionID, state, errText
}

func (f *fleetRunner) deviceEnded(i int, sessionID string, state api.TaskState, errText string) {
	f.set(i, sessionID, state, errText)
	f.fleet.events.Add(api.TaskEvent{Type: api.EventDeviceEnd, SessionID: sessionID, DeviceID: f.spec.devices[i],
		State: state, Error: errText})
}

// abortReached reports whether abortPercent of all the devices have
// failed.
func (f *fleetRunner) abortReached() bool {
	if f.spec.abortPercent == 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	failed := 0
	for _, d := range f.res.Devices {
		if d.State == api.StateFailed || d.State == api.StateCancelled {
			failed++
		}
	}
	return failed*100 >= f.spec.abortPercent*len(f.res.Devices)
}

// skipFrom marks the devices from i on as never started.
func (f *fleetRunner) skipFrom(i int, aborted bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.res.Aborted = aborted
	for j := i; j < len(f.res.Devices); j++ {
		f.res.Devices[j].State = api.StateSkipped
	}
}

// progress is the fleet's result so far.
func (f *fleetRunner) progress() api.FleetResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := f.res
	res.Devices = slices.Clone(f.res.Devices)
	return res
}

// outcome is completed when every device completed.
func (f *fleetRunner) outcome() outcome[api.FleetResult] {
	res := f.progress()
	counts := map[api.TaskState]int{}
	for _, d := range res.Devices {
		counts[d.State]++
	}
	n := len(res.Devices)
	if counts[api.StateCompleted] == n {
		return outcome[api.FleetResult]{state: api.StateCompleted, Result: res}
	}
	msg := fmt.Sprintf("%d of %d devices failed", n-counts[api.StateCompleted]-counts[api.StateSkipped], n)
	if counts[api.StateSkipped] > 0 {
		msg += fmt.Sprintf(", %d not started", counts[api.StateSkipped])
	}
	if res.Aborted {
		msg += fmt.Sprintf(" (aborted: at least %d%% failed)", f.spec.abortPercent)
	}
	return outcome[api.FleetResult]{state: api.StateFailed, Result: res, err: msg}
}

// LabelText writes labels as k=v,k=v, sorted.
func LabelText(labels map[string]string) string {
	keys := slices.Sorted(maps.Keys(labels))
	kv := make([]string, len(keys))
	for i, k := range keys {
		kv[i] = k + "=" + labels[k]
	}
	return strings.Join(kv, ",")
}
