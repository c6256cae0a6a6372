package computer

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/agent/internal/mcpproxy"
	"github.com/edgeaip/edgeaip/protocol"
)

// defaultName is the agent_name of a command that names none, and the root
// a command falls back to when its root_name has no config.
const defaultName = "default"

// defaultKey is the key of the Computer of a command that names none:
// Target{}.key().
const defaultKey = defaultName + "::::" + defaultName

// Target names the Computer a COMMAND is for, as its ServerMessage does.
type Target struct {
	AgentName, ProcessName, RootName string
}

// TargetOf is the Computer m is for.
func TargetOf(m *protocol.ServerMessage) Target {
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

// IdleAfter is how long a Computer may go unused before it is evicted,
// and the MCP servers started for it alone (reset: true) with it.
const IdleAfter = 10 * time.Minute

// Manager is UFO's ComputerManager: one Computer per
// agent_name::process_name::root_name, built on first use from the MCP
// config, and holding the device's wasm tools as well. The agent "default"
// needs no config: it has the wasm tools and whatever mcp.default lists.
// A Computer unused for IdleAfter is evicted, but the default one, whose
// tools the device registers with; used again, it is built afresh.
type Manager struct {
	mcp  config.MCPConfig
	pool *mcpproxy.Pool
	log  *slog.Logger

	mu        sync.Mutex
	meta      []Tool // agent-wide meta tools, on every Computer
	base      []Tool // the wasm tools, on every Computer
	computers map[string]*slot
}

// slot is a Computer, or why it could not be built, its use, and its
// subscriptions to the tools of its MCP servers.
type slot struct {
	computer *Computer
	err      error
	subs     []*mcpproxy.Subscription
	inUse    int       // commands running on it
	lastUsed time.Time // when it was last taken or given back
}

// NewManager returns a Manager whose Computers have the wasm tools base
// and the MCP servers mcp names, started from pool.
func NewManager(mcp config.MCPConfig, base []Tool, pool *mcpproxy.Pool, log *slog.Logger) *Manager {
	return &Manager{mcp: mcp, base: slices.Clone(base), pool: pool, log: log, computers: map[string]*slot{}}
}

// AddMeta adds agent-wide meta tools to every Computer. Call it before
// the first Get: Computers built before do not have them.
func (m *Manager) AddMeta(meta ...Tool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.meta = append(m.meta, meta...)
}

// Get returns the Computer for t, building it on first use. It waits for
// the Computer's MCP servers to have made their first start attempt, so
// that a command right after the agent starts finds their tools. An
// agent_name with no config is an error that names it.
func (m *Manager) Get(ctx context.Context, t Target) (*Computer, error) {
	c, release, err := m.acquire(ctx, t)
	release()
	return c, err
}

// acquire is Get for a command: the Computer is not evicted until the
// command calls release.
func (m *Manager) acquire(ctx context.Context, t Target) (c *Computer, release func(), err error) {
	key := t.key()
	m.mu.Lock()
	s, ok := m.computers[key]
	if !ok {
		// Building only subscribes: servers start in the background.
		s = m.build(key, t)
		m.computers[key] = s
	}
	s.inUse++
	s.lastUsed = time.Now()
	m.mu.Unlock()
	release = func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		s.inUse--
		s.lastUsed = time.Now()
	}
	if s.err != nil {
		return nil, release, s.err
	}
	for _, sub := range s.subs {
		sub.Server().WaitStarted(ctx)
	}
	return s.computer, release, nil
}

// EvictIdle evicts the Computers unused since before now−IdleAfter, but
// the default one, and ends their subscriptions: the MCP servers started
// for them alone stop.
func (m *Manager) EvictIdle(now time.Time) {
	m.mu.Lock()
	var idle []*slot
	for key, s := range m.computers {
		if key == (Target{}).key() || s.inUse > 0 || now.Sub(s.lastUsed) < IdleAfter {
			continue
		}
		delete(m.computers, key)
		if s.computer != nil {
			idle = append(idle, s)
		}
	}
	m.mu.Unlock()
	for _, s := range idle {
		m.log.Info("computer evicted: idle", "computer", s.computer.Name(), "idle_after", IdleAfter)
		for _, sub := range s.subs {
			sub.Cancel()
		}
	}
}

// FindBase returns the wasm tool called name in namespace, or nil.
func (m *Manager) FindBase(namespace, name string) Tool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.base {
		if i := t.Info(); i.Namespace == namespace && i.ToolName == name {
			return t
		}
	}
	return nil
}

// CanSwapBase refuses to put the wasm tool t in place of old (nil: in no
// tool's place) when t's key is held by another tool in a Computer, or
// among the wasm tools.
func (m *Manager) CanSwapBase(old, t Tool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	check := New("wasm tools", m.log)
	if err := check.Add(m.base...); err != nil {
		return err
	}
	if err := check.CanSwap(old, t); err != nil {
		return err
	}
	for _, s := range m.computers {
		if s.err != nil {
			continue
		}
		if err := s.computer.CanSwap(old, t); err != nil {
			return err
		}
	}
	return nil
}

// SwapBase puts the wasm tool t in place of old in every Computer, those
// built so far and those to come. Check CanSwapBase first.
func (m *Manager) SwapBase(old, t Tool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.computers {
		if s.err == nil {
			s.computer.swap(old, t)
		}
	}
	if i := slices.Index(m.base, old); old != nil && i >= 0 {
		m.base[i] = t
	} else {
		m.base = append(m.base, t)
	}
}

// RemoveBase takes the wasm tool t out of every Computer, those built so
// far and those to come, and reports whether it was there.
func (m *Manager) RemoveBase(t Tool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.Index(m.base, t)
	if i < 0 {
		return false
	}
	m.base = slices.Delete(m.base, i, i+1)
	for _, s := range m.computers {
		if s.err == nil {
			s.computer.remove(t)
		}
	}
	return true
}

// build builds the Computer of t: its meta tools, the wasm tools, and a
// subscription to the tools of each MCP server of its root.
func (m *Manager) build(key string, t Target) *slot {
	root, err := m.root(t)
	if err != nil {
		return &slot{err: err}
	}
	c := New(key, m.log, m.meta...)
	if err := c.Add(m.base...); err != nil {
		return &slot{err: err}
	}
	s := &slot{computer: c}
	for _, list := range []struct {
		toolType protocol.ToolType
		servers  []config.MCPServerConfig
	}{{protocol.ToolDataCollection, root.DataCollection}, {protocol.ToolAction, root.Action}} {
		for _, cfg := range list.servers {
			s.subs = append(s.subs, m.subscribe(c, m.pool.Server(cfg), list.toolType))
		}
	}
	m.log.Info("computer ready", "computer", key,
		"mcp_servers", len(root.DataCollection)+len(root.Action))
	return s
}

// subscribe has c take the tools of server under toolType, now and
// whenever they change, and explain a missing tool by the server's being
// down.
func (m *Manager) subscribe(c *Computer, server *mcpproxy.Server, toolType protocol.ToolType) *mcpproxy.Subscription {
	c.explainWith(server.Down)
	return server.Subscribe(toolType, func(tools []*mcpproxy.Tool) {
		list := make([]Tool, len(tools))
		for i, t := range tools {
			list[i] = t
		}
		c.setNamespace(toolType, server.Namespace(), list)
	})
}

// root finds the MCP servers of t, falling back to the agent's default
// root as UFO does.
func (m *Manager) root(t Target) (config.MCPRoot, error) {
	agentName := orDefault(t.AgentName)
	roots, ok := m.mcp[agentName]
	if !ok {
		if agentName == defaultName {
			return config.MCPRoot{}, nil
		}
		return config.MCPRoot{}, fmt.Errorf("agent_name %q has no configuration on this device", agentName)
	}
	if r, ok := roots[orDefault(t.RootName)]; ok {
		return r, nil
	}
	if r, ok := roots[defaultName]; ok {
		return r, nil
	}
	return config.MCPRoot{}, fmt.Errorf("agent_name %q has no root %q and no default root on this device", agentName, t.RootName)
}
