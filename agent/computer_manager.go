package agent

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
)

// defaultName is the agent_name of a command that names none, and the root
// a command falls back to when its root_name has no config.
const defaultName = "default"

// Target names the Computer a COMMAND is for, as its ServerMessage does.
type Target struct {
	AgentName, ProcessName, RootName string
}

func targetOf(m *protocol.ServerMessage) Target {
	return Target{AgentName: m.AgentName, ProcessName: m.ProcessName, RootName: m.RootName}
}

// key is UFO's key of a Computer: agent_name::process_name::root_name,
// with "default" for a missing agent or root name.
func (t Target) key() string {
	return orDefault(t.AgentName) + "::" + t.ProcessName + "::" + orDefault(t.RootName)
}

func orDefault(name string) string {
	if name == "" {
		return defaultName
	}
	return name
}

// computerIdleAfter is how long a Computer may go unused before it is
// evicted, and the MCP servers started for it alone (reset: true) with it.
const computerIdleAfter = 10 * time.Minute

// ComputerManager is UFO's ComputerManager: one Computer per
// agent_name::process_name::root_name, built on first use from the MCP
// config, and holding the device's wasm tools as well. The agent "default"
// needs no config: it has the wasm tools and whatever mcp.default lists.
// A Computer unused for computerIdleAfter is evicted, but the default one,
// whose tools the device registers with; used again, it is built afresh.
type ComputerManager struct {
	mcp  MCPConfig
	meta []tool // agent-wide meta tools, on every Computer
	pool *mcpPool
	log  *slog.Logger

	mu        sync.Mutex
	base      []tool // the wasm tools, on every Computer
	computers map[string]*computerSlot
}

// computerSlot is a Computer, or why it could not be built, and its use.
type computerSlot struct {
	computer *Computer
	err      error
	inUse    int       // commands running on it
	lastUsed time.Time // when it was last taken or given back
}

func newComputerManager(mcp MCPConfig, base, meta []tool, pool *mcpPool, log *slog.Logger) *ComputerManager {
	return &ComputerManager{mcp: mcp, base: base, meta: meta, pool: pool, log: log, computers: map[string]*computerSlot{}}
}

// Get returns the Computer for t, building it on first use. It waits for
// the Computer's MCP servers to have made their first start attempt, so
// that a command right after the agent starts finds their tools. An
// agent_name with no config is an error that names it.
func (m *ComputerManager) Get(ctx context.Context, t Target) (*Computer, error) {
	c, release, err := m.acquire(ctx, t)
	release()
	return c, err
}

// acquire is Get for a command: the Computer is not evicted until the
// command calls release.
func (m *ComputerManager) acquire(ctx context.Context, t Target) (c *Computer, release func(), err error) {
	key := t.key()
	m.mu.Lock()
	slot, ok := m.computers[key]
	if !ok {
		// Building only registers: servers start in the background.
		slot = &computerSlot{}
		slot.computer, slot.err = m.build(key, t)
		m.computers[key] = slot
	}
	slot.inUse++
	slot.lastUsed = time.Now()
	m.mu.Unlock()
	release = func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		slot.inUse--
		slot.lastUsed = time.Now()
	}
	if slot.err != nil {
		return nil, release, slot.err
	}
	for _, s := range slot.computer.boundServers() {
		s.waitStarted(ctx)
	}
	return slot.computer, release, nil
}

// evictIdle evicts the Computers unused since before now−computerIdleAfter,
// but the default one, and lets go of their MCP servers: those started
// for them alone stop.
func (m *ComputerManager) evictIdle(now time.Time) {
	m.mu.Lock()
	var idle []*Computer
	for key, slot := range m.computers {
		if key == (Target{}).key() || slot.inUse > 0 || now.Sub(slot.lastUsed) < computerIdleAfter {
			continue
		}
		delete(m.computers, key)
		if slot.computer != nil {
			idle = append(idle, slot.computer)
		}
	}
	m.mu.Unlock()
	for _, c := range idle {
		m.log.Info("computer evicted: idle", "computer", c.Name(), "idle_after", computerIdleAfter)
		m.pool.release(c)
	}
}

// evictIdleUntil evicts idle Computers now and then until ctx ends.
func (m *ComputerManager) evictIdleUntil(ctx context.Context) {
	t := time.NewTicker(computerIdleAfter / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.evictIdle(now)
		}
	}
}

// findBase returns the wasm tool called name in namespace, or nil.
func (m *ComputerManager) findBase(namespace, name string) tool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.base {
		if i := t.info(); i.Namespace == namespace && i.ToolName == name {
			return t
		}
	}
	return nil
}

// canSwapBase refuses to put the wasm tool t in place of old (nil: in no
// tool's place) when t's key is held by another tool in a Computer, or
// among the wasm tools.
func (m *ComputerManager) canSwapBase(old, t tool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	check := newComputer("wasm tools", m.log)
	if err := check.add(m.base...); err != nil {
		return err
	}
	if err := check.canSwap(old, t); err != nil {
		return err
	}
	for _, slot := range m.computers {
		if slot.err != nil {
			continue
		}
		if err := slot.computer.canSwap(old, t); err != nil {
			return err
		}
	}
	return nil
}

// swapBase puts the wasm tool t in place of old in every Computer, those
// built so far and those to come. Check canSwapBase first.
func (m *ComputerManager) swapBase(old, t tool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, slot := range m.computers {
		if slot.err == nil {
			slot.computer.swap(old, t)
		}
	}
	if i := slices.Index(m.base, old); old != nil && i >= 0 {
		m.base[i] = t
	} else {
		m.base = append(m.base, t)
	}
}

func (m *ComputerManager) build(key string, t Target) (*Computer, error) {
	root, err := m.root(t)
	if err != nil {
		return nil, err
	}
	c := newComputer(key, m.log, m.meta...)
	if err := c.add(m.base...); err != nil {
		return nil, err
	}
	for _, s := range root.DataCollection {
		m.pool.server(s).bind(c, protocol.ToolDataCollection)
	}
	for _, s := range root.Action {
		m.pool.server(s).bind(c, protocol.ToolAction)
	}
	m.log.Info("computer ready", "computer", key,
		"mcp_servers", len(root.DataCollection)+len(root.Action))
	return c, nil
}

// root finds the MCP servers of t, falling back to the agent's default
// root as UFO does.
func (m *ComputerManager) root(t Target) (MCPRoot, error) {
	agentName := orDefault(t.AgentName)
	roots, ok := m.mcp[agentName]
	if !ok {
		if agentName == defaultName {
			return MCPRoot{}, nil
		}
		return MCPRoot{}, fmt.Errorf("agent_name %q has no configuration on this device", agentName)
	}
	if r, ok := roots[orDefault(t.RootName)]; ok {
		return r, nil
	}
	if r, ok := roots[defaultName]; ok {
		return r, nil
	}
	return MCPRoot{}, fmt.Errorf("agent_name %q has no root %q and no default root on this device", agentName, t.RootName)
}
