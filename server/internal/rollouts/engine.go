// Package rollouts keeps the fleet at its desired state: for each
// rollout, the devices its selector picks run its current revision's
// tools. A worker per rollout reconciles what the store says each device
// should run with what the device reports, wave by wave, through the
// front door as recorded, audited tasks (stage_module, apply_revision,
// then the health checks); it stops past the failure budget, rolls back
// on request or on failure, and brings devices that link later, or gain
// the labels later, to the revision. Events start a reconciliation at
// once: an apply, a relabel, a device's registration, a change's end; a
// slow sweep catches what no event told. In a cluster one node leads
// each rollout, under its lease (lead.go), and hears of these events on
// the other nodes. See server/RATIONALE.md, "Rollouts", and
// server/internal/cluster/RATIONALE.md, "Rollouts in a cluster".
package rollouts

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
)

// DefaultConcurrency bounds the devices changing at once, across
// rollouts.
const DefaultConcurrency = 200

// DefaultSweep is how often a worker reconciles though nothing told it
// to: a store that failed a write, a message between nodes lost.
const DefaultSweep = 30 * time.Second

// Options tune the engine; the zero value gives the defaults.
type Options struct {
	// Concurrency bounds the devices changing at once, across
	// rollouts. Default DefaultConcurrency.
	Concurrency int
	// Sweep is how often each rollout is reconciled though no event
	// asked for it. Default DefaultSweep.
	Sweep time.Duration
}

// Config is what the engine works with.
type Config struct {
	Store *store.Store
	// Tasks is the front door each device's change goes through.
	Tasks *tasks.FrontDoor
	// Matching are the enrolled devices a selector picks.
	Matching func(context.Context, access.Selector) ([]string, error)
	// Online reports whether device id is linked, here or to another
	// node.
	Online func(id string) bool
	// Inventory is device id's last registration, or nil.
	Inventory func(ctx context.Context, id string) *protocol.SystemInfo
	// Node is this node in a cluster, where one node leads each
	// rollout; nil on a single node, which leads them all.
	Node Node
	Options
	Logger *slog.Logger
}

// Engine runs the rollouts.
type Engine struct {
	cfg   Config
	log   *slog.Logger
	slots chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	workers map[string]*worker
	// registered wakes those waiting for a device's registration, by
	// device: closed, and replaced, when it registers.
	registered map[string]chan struct{}
	staging    kept[map[string]any]
	streams    kept[[]byte]
}

// worker reconciles one rollout.
type worker struct {
	name string
	kick chan struct{}
	// lead is this node's lead of the rollout, in a cluster.
	lead lead
	// changing are the devices whose change runs now, on this node;
	// ended counts the changes ended, and endedAt is the count when each
	// device's last one ended: a reconciliation that read the rows
	// before then saw them as the change left them only if it ended
	// before the read.
	mu       sync.Mutex
	changing map[string]bool
	ended    uint64
	endedAt  map[string]uint64
	// registered are the devices that registered since the last
	// observation, whose reports alone may have changed; readAll asks
	// the next one to read every device's (at start, at each sweep).
	registered map[string]bool
	readAll    bool
}

// New returns an engine; Start starts it.
func New(cfg Config) *Engine {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Sweep <= 0 {
		cfg.Sweep = DefaultSweep
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Engine{cfg: cfg, log: cfg.Logger, slots: make(chan struct{}, cfg.Concurrency), ctx: ctx, cancel: cancel,
		workers: map[string]*worker{}, registered: map[string]chan struct{}{},
		staging: kept[map[string]any]{n: stageCacheSize}, streams: kept[[]byte]{n: streamCacheSize}}
}

// Start starts a worker for each rollout the store holds: those a
// restart interrupted go on where they were.
func (e *Engine) Start(ctx context.Context) error { return e.KickStored(ctx) }

// KickStored makes every rollout the store holds reconcile now, those
// this node has not heard of included: in a cluster, a node died, and
// the rollouts it led want a leader.
func (e *Engine) KickStored(ctx context.Context) error {
	all, err := e.cfg.Store.Rollouts().List(ctx)
	if err != nil {
		return err
	}
	for _, r := range all {
		e.Kick(r.Name)
	}
	return nil
}

// Stop stops the workers: no change starts, and no task of a change
// running; Wait waits for those running, whose tasks end with the
// server's shutdown. A change cut short is started again at the next
// start, or by the next leader, and finds done what it did.
func (e *Engine) Stop() { e.cancel() }

// Wait waits for the workers and the changes that Stop stopped. In a
// cluster, it then gives up the leads this node held, for other nodes to
// take at once.
func (e *Engine) Wait() {
	e.wg.Wait()
	e.mu.Lock()
	workers := slices.Collect(maps.Values(e.workers))
	e.mu.Unlock()
	for _, w := range workers {
		if w.lead.epoch != 0 {
			e.release(w.name, w.lead.epoch)
		}
	}
}

// announce tells the other nodes, if any, that rollout name changed
// here.
func (e *Engine) announce(name string) {
	if e.cfg.Node != nil {
		e.cfg.Node.Announce(name)
	}
}

// Kick makes rollout name's worker reconcile now, starting it if need
// be.
func (e *Engine) Kick(name string) {
	e.mu.Lock()
	w, ok := e.workers[name]
	if !ok && e.ctx.Err() == nil {
		w = &worker{name: name, kick: make(chan struct{}, 1), changing: map[string]bool{}, endedAt: map[string]uint64{},
			registered: map[string]bool{}, readAll: true}
		e.workers[name] = w
		e.wg.Go(func() { e.work(w) })
	}
	e.mu.Unlock()
	if w != nil {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// Registered tells the engine that device id registered, here or on
// another node, or registered again with a new inventory: a change
// waiting for its report goes on, and every rollout reconciles.
func (e *Engine) Registered(id string) {
	e.mu.Lock()
	if ch, ok := e.registered[id]; ok {
		close(ch)
		delete(e.registered, id)
	}
	workers := slices.Collect(maps.Values(e.workers))
	e.mu.Unlock()
	for _, w := range workers {
		w.mu.Lock()
		w.registered[id] = true
		w.mu.Unlock()
	}
	e.KickAll()
	if e.cfg.Online != nil && !e.cfg.Online(id) {
		e.kickWhenOnline(id)
	}
}

// kickWhenOnline reconciles every rollout once device id is online in
// this node's view, for a few seconds: in a cluster a registration on
// another node is heard apart from its link's lease, and may come first;
// a wave's device then waited for its device_timeout (a minute) to
// change, though linked.
func (e *Engine) kickWhenOnline(id string) {
	go func() { // not in wg: Registered may be told while the engine stops

		for range 20 {
			select {
			case <-e.ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
			if e.cfg.Online(id) {
				e.KickAll()
				return
			}
		}
	}()
}

// reread has the next observation read device id's report.
func (w *worker) reread(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.registered[id] = true
}

// toRead says which devices' reports the next observation reads: all,
// or those registered since the last.
func (w *worker) toRead() (all bool, registered map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	all, registered = w.readAll, w.registered
	w.readAll, w.registered = false, map[string]bool{}
	return all, registered
}

// nextRegistration is closed when device id next registers.
func (e *Engine) nextRegistration(id string) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch, ok := e.registered[id]
	if !ok {
		ch = make(chan struct{})
		e.registered[id] = ch
	}
	return ch
}

// reported waits until device id reports revision rev of rollout name,
// or ctx ends.
func (e *Engine) reported(ctx context.Context, id, name string, rev int) error {
	return e.awaitReport(ctx, id, func(info *protocol.SystemInfo) (bool, error) {
		reports, _ := protocol.RolloutsFromMetadata(info.CustomMetadata)
		return reports[name].Revision == rev, nil
	})
}

// awaitReport waits until ok says that what device id registers is as
// wanted, or fails, or ctx ends. It hears of registrations here and, in
// a cluster, on the other nodes (Registered); one it does not hear of (a
// message the cluster lost) is read at least every second.
func (e *Engine) awaitReport(ctx context.Context, id string, ok func(*protocol.SystemInfo) (bool, error)) error {
	for {
		next := e.nextRegistration(id)
		if info := e.cfg.Inventory(ctx, id); info != nil {
			if done, err := ok(info); done || err != nil {
				return err
			}
		}
		select {
		case <-next:
		case <-time.After(time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// KickAll makes every worker reconcile now: a device linked, or its
// labels changed, and any rollout may want it.
func (e *Engine) KickAll() {
	e.mu.Lock()
	names := make([]string, 0, len(e.workers))
	for n := range e.workers {
		names = append(names, n)
	}
	e.mu.Unlock()
	for _, n := range names {
		e.Kick(n)
	}
}

// work reconciles w's rollout on each kick, and at the times reconcile
// asks for.
func (e *Engine) work(w *worker) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-w.kick:
		case <-timer.C:
			w.mu.Lock()
			w.readAll = true
			w.mu.Unlock()
		}
		next := e.reconcile(e.ctx, w)
		if next <= 0 || next > e.cfg.Sweep {
			next = e.cfg.Sweep
		}
		timer.Reset(next)
	}
}

// start runs fn for device id of w's rollout in the background, in one
// of the engine's slots, unless the device is busy for v; the worker
// reconciles again once it ends. Its context ends with the server, or
// with this node's lead of the rollout.
func (e *Engine) start(w *worker, v *view, id string, fn func(ctx context.Context)) {
	ctx := e.changesCtx(w)
	w.mu.Lock()
	if w.busyLocked(id, v.read) {
		w.mu.Unlock()
		return
	}
	w.changing[id] = true
	w.mu.Unlock()
	e.wg.Go(func() {
		defer func() {
			w.mu.Lock()
			delete(w.changing, id)
			w.ended++
			w.endedAt[id] = w.ended
			w.mu.Unlock()
			e.Kick(w.name)
		}()
		select {
		case e.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-e.slots }()
		fn(ctx)
	})
}

// endedCount is how many changes have ended, for a view about to read
// the rows.
func (w *worker) endedCount() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ended
}

// busy reports whether device id is not to be touched by a
// reconciliation whose view read the rows when read changes had ended:
// a change of it runs, or ended since, and the view's row is what the
// change found, not what it left (the change's end reconciles again).
func (w *worker) busy(id string, read uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.busyLocked(id, read)
}

func (w *worker) busyLocked(id string, read uint64) bool {
	return w.changing[id] || w.endedAt[id] > read
}
