package computer

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/edgeaip/edgeaip/internal/suggest"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/wasmtools/schema"
)

// MetaNamespace is the namespace of tools the Computer itself provides.
const MetaNamespace = "computer"

// Computer is UFO's Computer: a registry of tools keyed
// "tool_type::tool_name", plus the meta tool list_tools. Each wasm tool
// directory and each MCP server is a namespace; the same tool name may be
// registered under both tool types. It is safe for concurrent use.
type Computer struct {
	name string
	log  *slog.Logger

	mu    sync.RWMutex
	tools map[string]registered // by tool key
	// down say why each source of tools bound here (an MCP server) is
	// not running, if it is not: what explains a missing tool.
	down []func() error
}

// registered is a tool in a Computer's registry, with its compiled input
// schema (nil when the tool declares none).
type registered struct {
	tool   Tool
	info   protocol.MCPToolInfo
	schema *schema.Validator
	meta   bool
}

// New returns a Computer named name with only its meta tools: list_tools,
// under each tool type, and those given.
func New(name string, log *slog.Logger, meta ...Tool) *Computer {
	c := &Computer{name: name, log: log, tools: map[string]registered{}}
	for _, tt := range protocol.ToolTypes {
		meta = append(meta, &listTools{computer: c, toolType: tt})
	}
	for _, t := range meta {
		r := c.entry(t)
		r.meta = true
		c.tools[r.info.ToolKey] = r
	}
	return c
}

// Name is the Computer's key, agent_name::process_name::root_name.
func (c *Computer) Name() string { return c.name }

// entry compiles t's input schema. A schema that does not compile is
// logged, and the tool is then called without checking its parameters:
// the tool still validates them itself.
func (c *Computer) entry(t Tool) registered {
	r := registered{tool: t, info: t.Info()}
	if len(r.info.InputSchema) == 0 {
		return r
	}
	v, err := schema.Compile(r.info.InputSchema)
	if err != nil {
		c.log.Warn("tool parameters will not be checked", "tool_key", r.info.ToolKey, "namespace", r.info.Namespace, "err", err)
	}
	r.schema = v
	return r
}

// Add registers tools; a key already taken is an error naming it.
func (c *Computer) Add(tools ...Tool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range tools {
		r := c.entry(t)
		if old, dup := c.tools[r.info.ToolKey]; dup {
			return fmt.Errorf("tool %s of namespace %q: the key is already registered by namespace %q",
				r.info.ToolKey, r.info.Namespace, old.info.Namespace)
		}
		c.tools[r.info.ToolKey] = r
	}
	return nil
}

// setNamespace replaces the tools of one tool type that namespace
// registered with tools, as an MCP server's tool list changes. A key that
// another namespace holds stays with it, as in UFO, and is logged.
func (c *Computer) setNamespace(toolType protocol.ToolType, namespace string, tools []Tool) {
	entries := make([]registered, len(tools))
	for i, t := range tools {
		entries[i] = c.entry(t)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, r := range c.tools {
		if !r.meta && r.info.Namespace == namespace && r.info.ToolType == toolType {
			delete(c.tools, key)
		}
	}
	for _, r := range entries {
		if old, taken := c.tools[r.info.ToolKey]; taken {
			c.log.Warn("tool key already registered; skipping", "computer", c.name,
				"tool_key", r.info.ToolKey, "namespace", namespace, "held_by", old.info.Namespace)
			continue
		}
		c.tools[r.info.ToolKey] = r
	}
}

// CanSwap refuses to put t in place of old (nil: in no tool's place) when
// t's key is held by another tool.
func (c *Computer) CanSwap(old, t Tool) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	i := t.Info()
	if holder, taken := c.tools[i.ToolKey]; taken && holder.tool != old {
		return fmt.Errorf("computer %s: tool %s is already registered by namespace %q", c.name, i.ToolKey, holder.info.Namespace)
	}
	return nil
}

// swap puts t in place of old (nil: in no tool's place). Check canSwap
// first; calls already running on old finish on it.
func (c *Computer) swap(old, t Tool) {
	r := c.entry(t)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old != nil {
		delete(c.tools, old.Info().ToolKey)
	}
	c.tools[r.info.ToolKey] = r
}

// remove takes t out, if it holds its key.
func (c *Computer) remove(t Tool) {
	key := t.Info().ToolKey
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.tools[key]; ok && r.tool == t {
		delete(c.tools, key)
	}
}

// explainWith adds down to what explains a missing tool: why a source of
// tools bound here is not running.
func (c *Computer) explainWith(down func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = append(c.down, down)
}

// resolve is UFO's command2tool: it finds the tool a command addresses,
// trying data_collection, then action, when the command names no type.
func (c *Computer) resolve(cmd protocol.Command) (registered, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if cmd.ToolType != "" {
		if r, ok := c.tools[protocol.ToolKey(cmd.ToolType, cmd.ToolName)]; ok {
			return r, nil
		}
		return registered{}, fmt.Errorf("unknown tool %q of type %s%s%s%s", cmd.ToolName, cmd.ToolType, c.where(), c.nearest(cmd.ToolName), c.downServers())
	}
	for _, tt := range protocol.ToolTypes {
		if r, ok := c.tools[protocol.ToolKey(tt, cmd.ToolName)]; ok {
			return r, nil
		}
	}
	return registered{}, fmt.Errorf("unknown tool %q%s%s%s", cmd.ToolName, c.where(), c.nearest(cmd.ToolName), c.downServers())
}

// where names the Computer in an error, unless it is the default one,
// which is every command's that names none: UFO's key of it means nothing
// to an operator who never named it.
func (c *Computer) where() string {
	if c.name == defaultKey {
		return ""
	}
	return " on " + c.name
}

// nearest is "; did you mean X?" for the tool most like name. Callers
// hold c.mu.
func (c *Computer) nearest(name string) string {
	names := make([]string, 0, len(c.tools))
	for _, r := range c.tools {
		names = append(names, r.info.ToolName)
	}
	slices.Sort(names)
	return suggest.DidYouMean(name, slices.Compact(names))
}

// prepare resolves cmd and checks its parameters against the tool's input
// schema. The error names the tool and each parameter at fault.
func (c *Computer) prepare(cmd protocol.Command) (registered, error) {
	r, err := c.resolve(cmd)
	if err != nil || r.schema == nil {
		return r, err
	}
	params := cmd.Parameters
	if params == nil {
		params = map[string]any{}
	}
	b, err := json.Marshal(params)
	if err == nil {
		err = r.schema.Validate(b)
	}
	if err != nil {
		// Worded as the sandbox words it, whichever layer catches it.
		return r, fmt.Errorf("tool %q: %w: %w", r.info.ToolName, sandbox.ErrInvalidParams, err)
	}
	return r, nil
}

// downServers explains an unknown tool by the MCP servers that are not
// running, whose tools may be the ones missing. Callers hold c.mu.
func (c *Computer) downServers() string {
	var down []string
	for _, why := range c.down {
		if err := why(); err != nil {
			down = append(down, err.Error())
		}
	}
	if len(down) == 0 {
		return ""
	}
	return " (" + strings.Join(down, "; ") + ")"
}

// ListTools returns the registered tools, filtered as UFO's list_tools
// filters them; an empty filter matches everything.
func (c *Computer) ListTools(toolType protocol.ToolType, namespace string, removeMeta bool) []protocol.MCPToolInfo {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := []protocol.MCPToolInfo{}
	for _, r := range c.tools {
		if (toolType != "" && r.info.ToolType != toolType) ||
			(namespace != "" && r.info.Namespace != namespace) ||
			(removeMeta && r.meta) {
			continue
		}
		out = append(out, r.info)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ToolKey < out[b].ToolKey })
	return out
}

// listTools is the meta tool list_tools, registered under each tool type.
type listTools struct {
	computer *Computer
	toolType protocol.ToolType
}

var listToolsSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"tool_type":   map[string]any{"type": "string", "enum": []any{"data_collection", "action"}},
		"namespace":   map[string]any{"type": "string"},
		"remove_meta": map[string]any{"type": "boolean", "default": true},
	},
	"additionalProperties": false,
}

func (l *listTools) Info() protocol.MCPToolInfo {
	return protocol.MCPToolInfo{
		ToolKey:     protocol.ToolKey(l.toolType, "list_tools"),
		ToolName:    "list_tools",
		Namespace:   MetaNamespace,
		ToolType:    l.toolType,
		Title:       "List tools",
		Description: "Lists the tools of this device, filtered by tool_type and namespace; meta tools are left out unless remove_meta is false.",
		InputSchema: listToolsSchema,
	}
}

// Call runs list_tools on parameters the Router has checked against
// listToolsSchema.
func (l *listTools) Call(_ context.Context, params map[string]any) protocol.Result {
	toolType, _ := params["tool_type"].(string)
	namespace, _ := params["namespace"].(string)
	removeMeta, set := params["remove_meta"].(bool)
	tools := l.computer.ListTools(protocol.ToolType(toolType), namespace, removeMeta || !set)
	return protocol.Result{Status: protocol.ResultSuccess, Result: tools}
}
