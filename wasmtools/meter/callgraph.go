package meter

import (
	"fmt"
	"math"
	"slices"

	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

// lightWork is the most fuel a function may spend, between entering it
// and its first check, for calls to it to go unchecked.
const lightWork = 10_000

// funcPlan is what the call graph says about one defined function. The
// checks it leaves out are ones the graph shows cannot matter.
//
// A direct call is checked before it is made when it closes a cycle of
// direct calls (it is a back edge of a depth-first search), or when the
// callee is not light. Calls through tables and to imports are always
// checked. That leaves a check on every cycle of the call graph, and at
// most lightWork per unchecked call between two checks, however the calls
// branch out.
type funcPlan struct {
	// light: without passing a check, a call to the function spends at
	// most lightWork: its body once (every loop iteration checks, see
	// body.go and dispatch.go) plus its unchecked calls.
	light bool
	// cycleCallees are the callees whose direct calls from this function
	// close a cycle, and so are checked.
	cycleCallees map[uint32]bool
	// countDepth: the function counts against the depth limit. Its entry
	// payment raises the depth, and the payment its caller makes when it
	// returns lowers it again (see segment.callReturn). Functions that
	// escape count, so that every twin call_indirect reaches counts alike.
	countDepth bool
	// checkDepth: the function checks the depth limit on entry. Only calls
	// inside a cycle of the call graph can nest without bound.
	checkDepth bool
	// hostEntry: the function is exported or the start function. Its
	// wrapper calls the safepoint first, and its twin checks before it
	// returns, so that a call that returns to the host, like one that
	// exits through proc_exit (an import, checked before it is called),
	// has not consumed more than its budget.
	hostEntry bool
}

// callGraph is what the analysis gathers from the module before rewriting.
type callGraph struct {
	callees   [][]uint32 // per defined function: defined functions it calls directly, once per call site
	cost      []int64    // per defined function: the static cost of its body
	indirect  []bool     // per defined function: it uses call_indirect
	reachable []bool     // per defined function: exported, start, in a table or taken by ref.func
	entries   []bool     // per defined function: exported or start

	indirectTypes []uint32 // types call_indirect uses, in order of first use
	indirectType  []bool   // per type: in indirectTypes
	importRefs    bool     // an import is in a table or taken by ref.func
	sharedRefs    bool     // a table, or a global of reference type, is imported or exported
}

func newCallGraph(l *layout) *callGraph {
	n := len(l.funcTypes)
	return &callGraph{
		callees:      make([][]uint32, n),
		cost:         make([]int64, n),
		indirect:     make([]bool, n),
		reachable:    make([]bool, n),
		entries:      make([]bool, n),
		indirectType: make([]bool, len(l.types)),
	}
}

// markFunc records a function index that escapes into a table, an export
// or a ref.func, where any call_indirect may reach it. It fails if there is
// no such function.
func (g *callGraph) markFunc(l *layout, f uint32) (uint32, error) {
	if err := l.checkFunc(f); err != nil {
		return 0, err
	}
	if f < l.importedFuncs {
		g.importRefs = true
	} else {
		g.reachable[f-l.importedFuncs] = true
	}
	return f, nil
}

// scanBody records the calls made by defined function i, and its locals.
// It is the first pass over the code, and so checks the function and type
// indices in it.
func (g *callGraph) scanBody(l *layout, i int, body []byte) error {
	r := wasmbin.NewReader(body)
	locals, err := readLocals(r)
	if err != nil {
		return err
	}
	l.localCounts[i] = locals.count
	var in wasmbin.Instr
	for r.Len() > 0 {
		if err := r.ReadInstr(&in); err != nil {
			return err
		}
		g.cost[i] += staticCost(in.Op)
		if err := g.scanInstr(l, i, &in); err != nil {
			return fmt.Errorf("body offset %d: %w", in.Start, err)
		}
	}
	return nil
}

func (g *callGraph) scanInstr(l *layout, i int, in *wasmbin.Instr) error {
	switch in.Op {
	case wasmbin.OpCall:
		if err := l.checkFunc(in.Index); err != nil {
			return fmt.Errorf("call: %w", err)
		}
		if in.Index >= l.importedFuncs {
			g.callees[i] = append(g.callees[i], in.Index-l.importedFuncs)
		}
	case wasmbin.OpCallIndirect:
		if err := l.checkType(in.Index); err != nil {
			return fmt.Errorf("call_indirect: %w", err)
		}
		g.indirect[i] = true
		if !g.indirectType[in.Index] {
			g.indirectType[in.Index] = true
			g.indirectTypes = append(g.indirectTypes, in.Index)
		}
	case wasmbin.OpRefFunc:
		if _, err := g.markFunc(l, in.Index); err != nil {
			return fmt.Errorf("ref.func: %w", err)
		}
	case wasmbin.OpBlock, wasmbin.OpLoop, wasmbin.OpIf:
		if in.BlockType >= 0 {
			if err := l.checkType(uint32(min(in.BlockType, math.MaxUint32))); err != nil {
				return fmt.Errorf("block type: %w", err)
			}
		}
	}
	return nil
}

// plan decides the checks of every defined function. Functions in the
// same strongly connected component of the call graph can call each other
// without bound, so they count depth; everything else cannot nest deeper
// than the longest chain of such functions. If that chain could push the
// real depth past what the depth limit promises, every function counts.
func (g *callGraph) plan(maxDepth uint32) []funcPlan {
	n := len(g.callees)
	// Node n stands for every call_indirect: it calls every function that
	// escapes, and every function using call_indirect calls it.
	succ := func(v int, yield func(int)) {
		if v == n {
			for f, ok := range g.reachable {
				if ok {
					yield(f)
				}
			}
			return
		}
		for _, c := range g.callees[v] {
			yield(int(c))
		}
		if g.indirect[v] {
			yield(n)
		}
	}
	comp, recursive := stronglyConnected(n+1, succ)
	chain := longestAcyclicChain(n, comp, recursive, succ)
	countAll := uint64(maxDepth)+uint64(chain) > MaxCallDepthLimit
	plans := make([]funcPlan, n)
	for f := range plans {
		check := recursive[comp[f]] || countAll
		plans[f] = funcPlan{
			countDepth: check || g.reachable[f],
			checkDepth: check,
			hostEntry:  g.entries[f],
		}
	}
	g.planDirectCalls(plans)
	return plans
}

// planDirectCalls finds the direct calls that close cycles, as the back
// edges of a depth-first search, and which functions are light. The
// search's post-order lists callees before callers once the back edges
// are set aside, so each function's unchecked callees are settled before
// it is.
func (g *callGraph) planDirectCalls(plans []funcPlan) {
	const (
		unvisited = iota
		onPath
		done
	)
	state := make([]uint8, len(g.callees))
	work := make([]int64, len(g.callees))
	type frame struct{ f, next int }
	for root := range g.callees {
		if state[root] != unvisited {
			continue
		}
		state[root] = onPath
		path := []frame{{f: root}}
		for len(path) > 0 {
			top := &path[len(path)-1]
			if top.next < len(g.callees[top.f]) {
				c := int(g.callees[top.f][top.next])
				top.next++
				switch state[c] {
				case onPath:
					if plans[top.f].cycleCallees == nil {
						plans[top.f].cycleCallees = map[uint32]bool{}
					}
					plans[top.f].cycleCallees[uint32(c)] = true
				case unvisited:
					state[c] = onPath
					path = append(path, frame{f: c})
				}
				continue
			}
			g.settleLight(plans, work, top.f)
			state[top.f] = done
			path = path[:len(path)-1]
		}
	}
}

// settleLight works out how much f can spend before its first check, and
// so whether it is light, once its unchecked callees are settled: its body
// once, plus what each unchecked call can spend. A call to a callee that
// is not light is checked and adds nothing.
func (g *callGraph) settleLight(plans []funcPlan, work []int64, f int) {
	w := g.cost[f]
	for _, c := range g.callees[f] {
		if !plans[f].cycleCallees[c] && plans[c].light {
			w += work[c]
		}
		if w > lightWork {
			break
		}
	}
	work[f] = w
	plans[f].light = w <= lightWork
}

// stronglyConnected labels each node with its component (Tarjan's
// algorithm, iterative so that deep call graphs cannot overflow the Go
// stack) and says which components contain a cycle. Components are
// numbered in reverse topological order: callees before callers.
func stronglyConnected(n int, succ func(int, func(int))) (comp []int, cyclic []bool) {
	const unvisited = -1
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	comp = make([]int, n)
	for i := range index {
		index[i] = unvisited
	}
	var stack []int
	next := 0
	type frame struct {
		v     int
		succs []int
		i     int
	}
	for root := range n {
		if index[root] != unvisited {
			continue
		}
		work := []frame{{v: root}}
		for len(work) > 0 {
			top := &work[len(work)-1]
			v := top.v
			if top.i == 0 && top.succs == nil {
				index[v], low[v] = next, next
				next++
				stack = append(stack, v)
				onStack[v] = true
				top.succs = []int{}
				succ(v, func(w int) { top.succs = append(top.succs, w) })
			}
			if top.i < len(top.succs) {
				w := top.succs[top.i]
				top.i++
				if index[w] == unvisited {
					work = append(work, frame{v: w})
				} else if onStack[w] {
					low[v] = min(low[v], index[w])
				}
				continue
			}
			work = work[:len(work)-1]
			if len(work) > 0 {
				parent := work[len(work)-1].v
				low[parent] = min(low[parent], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			c := len(cyclic)
			size, selfLoop := 0, false
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = c
				size++
				if w == v {
					break
				}
			}
			succ(v, func(w int) { selfLoop = selfLoop || w == v })
			cyclic = append(cyclic, size > 1 || selfLoop)
		}
	}
	return comp, cyclic
}

// longestAcyclicChain returns the largest number of functions outside any
// cycle that can be on the call stack at once: the longest path through
// the component graph, counting only those functions. Node n is the
// call_indirect stand-in and counts for nothing.
func longestAcyclicChain(n int, comp []int, cyclic []bool, succ func(int, func(int))) int {
	members := make([][]int, len(cyclic))
	for v, c := range comp {
		members[c] = append(members[c], v)
	}
	longest := make([]int, len(cyclic))
	best := 0
	// Callees come first in Tarjan's numbering, so each component's
	// successors are final when it is reached.
	for c := range cyclic {
		below := 0
		for _, v := range members[c] {
			succ(v, func(w int) {
				if comp[w] != c {
					below = max(below, longest[comp[w]])
				}
			})
		}
		self := 0
		if !cyclic[c] && members[c][0] != n {
			self = 1
		}
		longest[c] = below + self
		best = max(best, longest[c])
	}
	return best
}

// analyzeCalls builds the call graph from the sections that name
// functions: exports, start, elements, globals and code.
func analyzeCalls(l *layout, sections []wasmbin.Section) (*callGraph, error) {
	g := newCallGraph(l)
	g.sharedRefs = l.importedTables > 0 || slices.ContainsFunc(l.globalTypes[:l.importedGlobals()], isRefType)
	l.localCounts = make([]uint32, len(l.funcTypes))
	record := func(f uint32) (uint32, error) { return g.markFunc(l, f) }
	for _, s := range sections {
		var err error
		switch s.ID {
		case wasmbin.SectionExport:
			err = g.readExports(l, s.Payload)
		case wasmbin.SectionStart:
			var f uint32
			if f, err = readStart(l, s.Payload); err == nil {
				g.markEntry(l, f)
			}
		case wasmbin.SectionElement:
			_, err = rewriteElements(s.Payload, record)
		case wasmbin.SectionGlobal:
			_, err = rewriteGlobals(s.Payload, record)
		case wasmbin.SectionCode:
			err = forEachBody(s.Payload, len(l.funcTypes), func(i int, body []byte) error {
				if err := g.scanBody(l, i, body); err != nil {
					return fmt.Errorf("function %d: %w", l.importedFuncs+uint32(i), err)
				}
				return nil
			})
		}
		if err != nil {
			return nil, err
		}
	}
	return g, nil
}

func isRefType(t byte) bool { return t == refFunc || t == refExtern }

func (g *callGraph) readExports(l *layout, p []byte) error {
	exports, err := readExports(p)
	if err != nil {
		return err
	}
	for _, e := range exports {
		switch e.kind {
		case externFunc:
			if _, err := g.markFunc(l, e.index); err != nil {
				return fmt.Errorf("export %q: %w", e.name, err)
			}
			g.markEntry(l, e.index)
		case externTable:
			g.sharedRefs = true
		case externGlobal:
			if uint64(e.index) >= uint64(len(l.globalTypes)) {
				return fmt.Errorf("export %q: global %d does not exist (the module has %d)", e.name, e.index, len(l.globalTypes))
			}
			g.sharedRefs = g.sharedRefs || isRefType(l.globalTypes[e.index])
		}
	}
	return nil
}

// markEntry records that the host calls f, an index checkFunc accepted.
func (g *callGraph) markEntry(l *layout, f uint32) {
	if f >= l.importedFuncs {
		g.entries[f-l.importedFuncs] = true
	}
}
