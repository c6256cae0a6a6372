package tasks

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/encodedonce"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/tasks/internal/inventory"
	"github.com/edgeaip/edgeaip/server/plan"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/edgeaip/edgeaip/wasmtools/schema"
)

// Admission is the one stage every command, plan and fleet passes before
// anything is recorded or sent: the wire's limits, the bounds on sizes,
// each call's tool against its device's inventory and its parameters
// against the tool's input schema. It refuses a request with every
// problem it finds, each with its path in the request. See RATIONALE.md.

// Limits bound what one request may ask of devices.
type Limits struct {
	// MaxPlanBytes bounds a plan as JSON, once its YAML aliases are
	// expanded. Default 1 MiB.
	MaxPlanBytes int
	// MaxParamBytes bounds the parameters of one command, all its
	// actions' together, as JSON; install_tool's module is bounded by the
	// frame cap alone. Default: the frame cap.
	MaxParamBytes int
}

func (l *Limits) SetDefaults(frameCap int64) {
	if l.MaxPlanBytes <= 0 {
		l.MaxPlanBytes = plan.DefaultMaxExpandedBytes
	}
	if l.MaxParamBytes <= 0 {
		l.MaxParamBytes = int(frameCap)
	}
}

// MaxParamsDepth is how deep parameters may nest: a COMMAND frame holds
// them at its fourth level (the message, its actions, an action, the
// parameters), and a frame nests at most protocol.MaxDepth levels.
const MaxParamsDepth = protocol.MaxDepth - 3

// maxProblems bounds the problems one refusal lists.
const maxProblems = 100

// pathShown is how many keys of a parameter's path a problem shows.
const pathShown = 8

// Refusal is admission's answer to a request it refuses: every problem
// it found, in the request's order.
type Refusal struct {
	Problems []api.Problem
}

func (r *Refusal) Error() string {
	lines := make([]string, len(r.Problems))
	for i, p := range r.Problems {
		lines[i] = p.String()
	}
	return "refused: " + strings.Join(lines, "; ")
}

// Order is a request as admission checks it: steps for one device or for
// each device of a fleet. An order takes the parameters' maps it is made
// from: it wraps their values in place (encodedonce.Wrap), so that each
// is encoded once per format, from admission's checks to the wire, the
// command's record and its audit entry, for every device it goes to.
type Order struct {
	// who asks: its role and scope hold the request too.
	who *identity.Caller
	// Devices are the targets: one device, or every device a fleet's
	// labels matched.
	Devices []string
	steps   []step
	// plan is what the steps come from; nil for a single command.
	plan *plan.Plan
	// planJSON is plan as JSON, as the task's row keeps it, or planErr
	// why it cannot be: encoded once, for admission to measure and for
	// the task to keep.
	planJSON []byte
	planErr  error
}

// CommandOrder is a single command for a device, asked by who. It takes
// the actions' parameters, as Order says.
func CommandOrder(who *identity.Caller, deviceID string, actions []protocol.Command) Order {
	for _, a := range actions {
		encodedonce.Wrap(a.Parameters)
	}
	return Order{who: who, Devices: []string{deviceID}, steps: []step{commandStep(actions, 0)}}
}

// PlanOrder is a plan for devices, asked by who. It takes the plan's
// parameters, as Order says.
func PlanOrder(who *identity.Caller, p *plan.Plan, devices ...string) Order {
	for _, st := range p.Steps {
		for _, a := range st.Batch() {
			encodedonce.Wrap(a.Parameters)
		}
	}
	b, err := json.Marshal(p)
	return Order{who: who, Devices: devices, steps: planSteps(p), plan: p, planJSON: b, planErr: err}
}

// Admission checks orders. Its inventories are the ones the dispatcher
// resolves calls against when it sends them, so that what it admits
// resolves then too, unless the device has changed in between.
type Admission struct {
	limits    Limits
	frameCap  int64
	inventory func(deviceID string) inventory.Inventory
	schemas   schemaCache
	// Reachable, in cluster mode, refuses work for devices this node
	// cannot reach now (NATS away), with an *Unreachable; nil on a single
	// node.
	Reachable func(deviceIDs []string) error
}

// Unreachable refuses new work, in cluster mode, for devices this node
// cannot reach now: 503 on HTTP.
type Unreachable struct{ Reason string }

func (e *Unreachable) Error() string { return e.Reason }

// InDoubt refuses work on a node that doubts its cluster lease, for why
// (cluster.Cluster.LeaseDoubt): new work at admission, and a new command
// that was waiting for the store when the doubt began.
func InDoubt(why string) *Unreachable { return &Unreachable{Reason: "new work refused: " + why} }

// NewAdmission checks orders against limits, for links whose frames are
// at most frameCap bytes, and against their devices' tools as disp knows
// them.
func NewAdmission(limits Limits, frameCap int64, disp *dispatch.Dispatcher) *Admission {
	return &Admission{limits: limits, frameCap: frameCap, inventory: func(id string) inventory.Inventory { return inventory.Of(disp, id) }}
}

// admit returns nil if o may go ahead; a *forbidden if o installs a tool
// its requester may not (a role below deployer, or a tool outside its
// scope); an *Unreachable if, in cluster mode, a device is linked
// elsewhere while NATS is away; or a *Refusal with every problem found. The problems come step
// by step, in the request's order: first the plan's size, then each
// step's wire limits and sizes, then each call on each device. A call to
// a tool outside the requester's scope is refused as one its device does
// not have.
func (a *Admission) admit(o Order) error {
	if err := o.installsAllowed(); err != nil {
		return err
	}
	if a.Reachable != nil {
		if err := a.Reachable(o.Devices); err != nil {
			return err
		}
	}
	c := check{Admission: a, scope: o.who.Scope, seen: map[api.Problem]bool{}}
	if o.plan != nil {
		c.planSize(o.planJSON, o.planErr)
	}
	invs := make([]inventory.Inventory, len(o.Devices))
	for i, id := range o.Devices {
		invs[i] = a.inventory(id)
	}
	installed := false
	for _, st := range o.steps {
		if c.full() {
			break
		}
		if len(invs) > 1 {
			c.measured = map[string]bool{}
		}
		params, sound := c.wire(st)
		for _, inv := range invs {
			c.onDevice(inv, st, params, sound, installed)
		}
		installed = installed || st.installs()
	}
	if len(c.problems) == 0 {
		return nil
	}
	return &Refusal{Problems: c.problems}
}

// installs reports whether the step installs a tool: the steps after it
// may use a tool the inventory does not list yet.
func (st step) installs() bool {
	return slices.ContainsFunc(st.calls, func(c inventory.Call) bool { return c.Cmd.ToolName == protocol.InstallToolName })
}

// installsAllowed checks o's calls that install a tool against its
// requester: only a deployer installs tools, a scoped one only a tool its
// patterns allow, and only a rollout stages modules and applies
// revisions, its own.
func (o Order) installsAllowed() error {
	for _, st := range o.steps {
		for _, call := range st.calls {
			if err := o.rolloutsOwn(call); err != nil {
				return err
			}
			if call.Cmd.ToolName != protocol.InstallToolName {
				continue
			}
			if !o.who.Role.Covers(access.Deployer) {
				return &identity.Forbidden{Reason: fmt.Sprintf("%s: identity %q has role %s: installing a tool needs %s", call.Path, o.who.Name, o.who.Role, access.Deployer)}
			}
			if err := installsInScope(call, o.who); err != nil {
				return err
			}
		}
	}
	return nil
}

// rolloutsOwn refuses stage_module and the agent's update tools
// (stage_release, apply_release, end_trial) from anyone but a rollout,
// and apply_revision from anyone but the rollout it names.
func (o Order) rolloutsOwn(call inventory.Call) error {
	n := call.Cmd.ToolName
	if !protocol.RolloutsOwn(n) {
		return nil
	}
	name, _ := encodedonce.Unwrap(call.Cmd.Parameters["rollout"]).(string)
	if !o.who.ARollout() || (n == protocol.ApplyRevisionName && !o.who.ForRollout(name)) {
		return &identity.Forbidden{Reason: fmt.Sprintf("%s: %s is a rollout's own, for its own tools: apply a rollout instead (aipctl rollout apply)", call.Path, n)}
	}
	return nil
}

// installsInScope checks that the tool an install_tool call installs is
// one who's tool patterns allow: its module must carry its manifest, since
// no other part of the request says which tool it is.
func installsInScope(call inventory.Call, who *identity.Caller) error {
	if len(who.Scope.Tools) == 0 {
		return nil
	}
	wasm, _, err := protocol.InstalledModule(encodedonce.Plain(call.Cmd.Parameters))
	if err != nil {
		return nil // the module is bad: the device refuses it, and installs nothing
	}
	mod, err := manifest.FromWasm(wasm)
	if err != nil {
		return &identity.Forbidden{Reason: fmt.Sprintf("%s: identity %q may install only tools its scope allows (%s), and the module's manifest cannot say which it is: %v",
			call.Path, who.Name, who.Scope, err)}
	}
	if m := mod.Manifest; !who.Scope.Tool(m.ToolType, m.Name) {
		return &identity.Forbidden{Reason: fmt.Sprintf("%s: the module installs %s, which identity %q's scope (%s) does not allow",
			call.Path, protocol.ToolKey(protocol.ToolType(m.ToolType), m.Name), who.Name, who.Scope)}
	}
	return nil
}

// check is one run of admission: the problems found so far.
type check struct {
	*Admission
	// scope is the requester's, whose tool patterns each call is held to.
	scope    access.Scope
	problems []api.Problem
	seen     map[api.Problem]bool
	// measured are the COMMAND frames of the step being checked that have
	// been measured on a device already (frameKey); nil for an order with
	// one device.
	measured map[string]bool
}

// add records a problem once, up to maxProblems; one more then says that
// there were more.
func (c *check) add(path, format string, args ...any) {
	p := api.Problem{Path: path, Problem: fmt.Sprintf(format, args...)}
	if c.seen[p] {
		return
	}
	c.seen[p] = true
	switch {
	case len(c.problems) < maxProblems:
		c.problems = append(c.problems, p)
	case len(c.problems) == maxProblems:
		c.problems = append(c.problems, api.Problem{Path: "request", Problem: "more problems than these"})
	}
}

// full reports whether the check has found all the problems it lists.
func (c *check) full() bool { return len(c.problems) > maxProblems }

// planSize bounds the plan as it is stored and sent: as JSON, its aliases
// expanded.
func (c *check) planSize(b []byte, err error) {
	switch {
	case err != nil:
		c.add("plan", "not representable as JSON: %v", err)
	case len(b) > c.limits.MaxPlanBytes:
		c.add("plan", "%s", PlanTooBig(len(b), c.limits.MaxPlanBytes, false))
	}
}

// PlanTooBig says that a plan of size bytes, or at least that many, is
// over limit.
func PlanTooBig(size, limit int, atLeast bool) string {
	s := fmt.Sprintf("%d bytes as JSON once its YAML aliases are expanded, more than the limit of %d", size, limit)
	if atLeast {
		return "at least " + s
	}
	return s
}

// wire checks what does not depend on the device: each call's parameters
// against the wire's limits, and the step's parameters against
// MaxParamBytes. It returns each call's parameters as JSON, and whether
// the step is sound enough to check further.
func (c *check) wire(st step) (params [][]byte, sound bool) {
	sound = true
	if len(st.calls) > protocol.MaxArrayElements {
		c.add(st.path, "%d actions; a frame holds at most %d in one array", len(st.calls), protocol.MaxArrayElements)
		sound = false
	}
	params = make([][]byte, len(st.calls))
	total := 0
	for i, call := range st.calls {
		if !c.paramShape(call) {
			sound = false
			continue
		}
		b, err := encodedonce.JSON(call.Cmd.Parameters)
		if err != nil {
			c.add(call.Path+".parameters", "not representable as JSON: %v", err)
			sound = false
			continue
		}
		params[i] = b
		if !protocol.CarriesModule(call.Cmd.ToolName) {
			total += len(b)
		}
	}
	if total > c.limits.MaxParamBytes {
		c.add(st.path, "parameters of %d bytes as JSON, more than the %d one command may carry", total, c.limits.MaxParamBytes)
		sound = false
	}
	return params, sound
}

// paramShape checks a call's parameters against the wire's limits on a
// frame: how deep they nest, and how many elements an array or a map
// holds. It reports whether they are within them.
func (c *check) paramShape(call inventory.Call) bool {
	w := shapeWalk{}
	depth, deepest := w.walk(call.Cmd.Parameters)
	for _, crowd := range w.crowded {
		c.add(paramPath(call, crowd.path), "%d elements; a frame holds at most %d in one %s", crowd.n, crowd.limit, crowd.kind)
	}
	if depth > MaxParamsDepth {
		slices.Reverse(deepest)
		c.add(paramPath(call, deepest), "nested %d levels deep; a COMMAND frame has room for %d (%d levels in all)",
			depth, MaxParamsDepth, protocol.MaxDepth)
	}
	return depth <= MaxParamsDepth && len(w.crowded) == 0
}

// paramPath is the path of a parameter of call, given by its keys, the
// first pathShown of them.
func paramPath(call inventory.Call, keys []string) string {
	p := call.Path + ".parameters"
	if len(keys) == 0 {
		return p
	}
	clipped := ""
	if len(keys) > pathShown {
		keys, clipped = keys[:pathShown], "…"
	}
	return p + "." + strings.Join(keys, ".") + clipped
}

// shapeWalk measures parameters for the wire's limits.
type shapeWalk struct {
	path    []string // keys from the parameters to where the walk is
	crowded []crowd
}

// crowd is an array or a map with more elements than a frame takes.
type crowd struct {
	path     []string
	kind     string
	n, limit int
}

// walk returns how deep v nests (0 for a scalar, 1 for an array or map of
// scalars) and, reversed, the keys to its deepest array or map, the least
// key first among equals. Indices are keys too, as the schema's problems
// name them.
func (w *shapeWalk) walk(v any) (depth int, deepest []string) {
	switch v := encodedonce.Unwrap(v).(type) {
	case map[string]any:
		w.crowdedAt(len(v), protocol.MaxMapPairs, "map")
		best := ""
		for k, e := range v {
			w.path = append(w.path, k)
			d, keys := w.walk(e)
			w.path = w.path[:len(w.path)-1]
			if d > depth || (d == depth && d > 0 && k < best) {
				depth, deepest, best = d, append(keys, k), k
			}
		}
	case []any:
		w.crowdedAt(len(v), protocol.MaxArrayElements, "array")
		for i, e := range v {
			w.path = append(w.path, strconv.Itoa(i))
			d, keys := w.walk(e)
			w.path = w.path[:len(w.path)-1]
			if d > depth {
				depth, deepest = d, append(keys, strconv.Itoa(i))
			}
		}
	default:
		return 0, nil
	}
	return depth + 1, deepest
}

func (w *shapeWalk) crowdedAt(n, limit int, kind string) {
	if n > limit {
		w.crowded = append(w.crowded, crowd{path: slices.Clone(w.path), kind: kind, n: n, limit: limit})
	}
}

// onDevice checks a step on one device: each call resolves as it will
// when sent, names a tool the device lists and has parameters its input
// schema takes; and, if the step is sound on the wire, its COMMAND fits a
// frame of the device's wire. The calls of a step after one that installs
// a tool are resolved and checked when they are sent: they may use the
// tool installed, which the inventory does not list yet.
func (c *check) onDevice(inv inventory.Inventory, st step, params [][]byte, sound, afterInstall bool) {
	cmds := make([]protocol.Command, len(st.calls))
	resolved := true
	for i, call := range st.calls {
		cmds[i] = call.Cmd
		if afterInstall {
			continue
		}
		cmd, _, err := inv.ResolveCall(call)
		if err == nil {
			cmd, err = inv.Confine(call, cmd, c.scope)
		}
		if err != nil {
			c.add(call.Path+"."+call.ToolField, "%v", err)
			resolved = false
			continue
		}
		cmds[i] = cmd
		if !inv.ListsTools() {
			continue
		}
		t, found := inv.Lookup(call)
		if !found {
			c.add(call.Path+"."+call.ToolField, "%v", inv.NoTool(call))
			continue
		}
		if params[i] != nil {
			c.schema(inv, call, t, params[i])
		}
	}
	if sound && resolved {
		c.frame(inv, st, cmds)
	}
}

// schema checks a call's parameters against its tool's input schema, as
// the agent will. A schema that does not compile checks nothing, as on
// the agent.
func (c *check) schema(inv inventory.Inventory, call inventory.Call, t protocol.MCPToolInfo, params []byte) {
	if len(t.InputSchema) == 0 {
		return
	}
	v := c.schemas.validator(t.InputSchema)
	if v == nil {
		return
	}
	var bad *schema.Error
	if !errors.As(v.Validate(params), &bad) {
		return
	}
	whose := fmt.Sprintf("says the input schema of %q on device %q", call.Label(), inv.DeviceID)
	if !inv.Online {
		whose += " (offline: as it last registered)"
	}
	for _, p := range bad.Problems {
		path := call.Path + ".parameters"
		if p.Field != "" {
			path += "." + p.Field
		}
		c.add(path, "%s, %s", p.Message, whose)
	}
}

// schemaCache keeps input schemas compiled, across requests, by their
// JSON: compiling one costs some hundreds of µs, more than all the rest
// of admitting a command. It keeps at most maxSchemas; past that, one
// goes for each that comes, so that devices that register ever new
// schemas cost time, not memory.
//
// It also finds a schema by the map that holds it (byDoc): a device's
// inventory keeps its tools' schemas, the same maps command after
// command until it registers again, so that a command need not encode
// its tool's schema to find it compiled. The entry holds its map, which
// therefore cannot be freed and its address taken by another while the
// entry lasts; a registration decodes fresh maps and never changes one
// in place.
type schemaCache struct {
	mu     sync.Mutex
	byJSON map[string]*schema.Validator // nil: it does not compile
	byDoc  map[uintptr]schemaEntry
}

// schemaEntry is a schema map and its compiled validator (nil: it does
// not compile).
type schemaEntry struct {
	doc map[string]any
	v   *schema.Validator
}

// maxSchemas bounds the schemas a schemaCache keeps.
const maxSchemas = 1024

// validator is doc compiled, or nil if it does not compile.
func (sc *schemaCache) validator(doc map[string]any) *schema.Validator {
	at := reflect.ValueOf(doc).Pointer()
	sc.mu.Lock()
	e, ok := sc.byDoc[at]
	sc.mu.Unlock()
	if ok {
		return e.v
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil
	}
	key := string(b)
	sc.mu.Lock()
	v, ok := sc.byJSON[key]
	sc.mu.Unlock()
	if !ok {
		v, _ = schema.Compile(doc)
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.byJSON = keepBounded(sc.byJSON, key, v)
	sc.byDoc = keepBounded(sc.byDoc, at, schemaEntry{doc: doc, v: v})
	return v
}

// keepBounded adds k to m, making m if nil, after dropping entries past
// maxSchemas - 1, and returns m.
func keepBounded[K comparable, V any](m map[K]V, k K, v V) map[K]V {
	if m == nil {
		m = map[K]V{}
	}
	for old := range m {
		if len(m) < maxSchemas {
			break
		}
		delete(m, old)
	}
	m[k] = v
	return m
}

// frame checks that the step's COMMAND fits a frame on the device's wire.
func (c *check) frame(inv inventory.Inventory, st step, cmds []protocol.Command) {
	enc := inv.Encoding()
	if c.measuredBefore(enc, cmds) {
		return
	}
	size, err := dispatch.FrameSize(enc, dispatch.CommandMessage(placeholderID, placeholderID, withCallIDs(cmds, placeholderID)))
	switch {
	case err != nil:
		c.add(st.path, "cannot be encoded as a frame: %v", err)
	case int64(size) > c.frameCap:
		c.add(st.path, "%s", dispatch.FrameTooBig(size, enc, c.frameCap))
	}
}

// measuredBefore reports whether the step's COMMAND, as cmds, was
// measured in enc on another device, and remembers that it now is. The
// devices of a fleet mostly send the same frame: each call's parameters
// are the step's, on every device, and its ids are placeholders; only the
// tool type a call resolves to may differ. Measured once, a frame of a
// module being installed is not encoded again for each device.
func (c *check) measuredBefore(enc protocol.Encoding, cmds []protocol.Command) bool {
	if c.measured == nil {
		return false
	}
	key := frameKey(enc, cmds)
	if c.measured[key] {
		return true
	}
	c.measured[key] = true
	return false
}

// frameKey tells apart the frames of one step's COMMAND: by encoding, and
// each call's tool name and type, each with its length before it, so that
// no two lists of names make the same key.
func frameKey(enc protocol.Encoding, cmds []protocol.Command) string {
	key := []byte(enc.String())
	for _, cmd := range cmds {
		for _, s := range []string{cmd.ToolName, string(cmd.ToolType)} {
			key = strconv.AppendInt(append(key, ' '), int64(len(s)), 10)
			key = append(append(key, ':'), s...)
		}
	}
	return string(key)
}

// placeholderID stands for the ids a command gets when it is sent, with
// their length.
const placeholderID = "00000000-0000-0000-0000-000000000000"

// withCallIDs is cmds, each with the call_id id.
func withCallIDs(cmds []protocol.Command, id string) []protocol.Command {
	out := slices.Clone(cmds)
	for i := range out {
		out[i].CallID = id
	}
	return out
}
