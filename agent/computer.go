package agent

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/edgeaip/edgeaip/protocol"
)

// metaNamespace is the namespace of tools the Computer itself provides.
const metaNamespace = "computer"

// Computer is UFO's Computer: a registry of tools keyed
// "tool_type::tool_name", plus the meta tool list_tools. It is safe for
// concurrent use.
type Computer struct {
	name  string
	mu    sync.RWMutex
	tools map[string]tool
	meta  map[string]bool // tool names that are meta tools
}

// NewComputer returns a Computer with only its meta tools registered.
func NewComputer(name string) *Computer {
	c := &Computer{name: name, tools: map[string]tool{}, meta: map[string]bool{}}
	for _, tt := range protocol.ToolTypes {
		c.addMeta(&listTools{computer: c, toolType: tt})
	}
	return c
}

func (c *Computer) addMeta(t tool) {
	i := t.info()
	c.tools[i.ToolKey] = t
	c.meta[i.ToolName] = true
}

// add registers tools; a key already taken is an error naming it.
func (c *Computer) add(tools ...tool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range tools {
		key := t.info().ToolKey
		if _, dup := c.tools[key]; dup {
			return fmt.Errorf("computer %s: tool %s is already registered", c.name, key)
		}
		c.tools[key] = t
	}
	return nil
}

// find returns the tool called name in namespace, of either type, or nil.
func (c *Computer) find(namespace, name string) tool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, t := range c.tools {
		if i := t.info(); i.Namespace == namespace && i.ToolName == name && !c.meta[name] {
			return t
		}
	}
	return nil
}

// canSwap refuses to put t in place of old (nil: in no tool's place) when
// t's key is held by another tool.
func (c *Computer) canSwap(old, t tool) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	i := t.info()
	if holder, taken := c.tools[i.ToolKey]; taken && holder != old {
		return fmt.Errorf("computer %s: tool %s is already registered by namespace %q", c.name, i.ToolKey, holder.info().Namespace)
	}
	return nil
}

// swap puts t in place of old (nil: in no tool's place). Check canSwap
// first; calls already running on old finish on it.
func (c *Computer) swap(old, t tool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old != nil {
		delete(c.tools, old.info().ToolKey)
	}
	c.tools[t.info().ToolKey] = t
}

// resolve is UFO's command2tool: it finds the tool a command addresses,
// trying each tool type when the command names none.
func (c *Computer) resolve(cmd protocol.Command) (tool, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if cmd.ToolType != "" {
		if t, ok := c.tools[protocol.ToolKey(cmd.ToolType, cmd.ToolName)]; ok {
			return t, nil
		}
		return nil, fmt.Errorf("unknown tool %q of type %s on %s", cmd.ToolName, cmd.ToolType, c.name)
	}
	for _, tt := range protocol.ToolTypes {
		if t, ok := c.tools[protocol.ToolKey(tt, cmd.ToolName)]; ok {
			return t, nil
		}
	}
	return nil, fmt.Errorf("unknown tool %q on %s", cmd.ToolName, c.name)
}

// ListTools returns the registered tools, filtered as UFO's list_tools
// filters them; an empty filter matches everything.
func (c *Computer) ListTools(toolType protocol.ToolType, namespace string, removeMeta bool) []protocol.MCPToolInfo {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := []protocol.MCPToolInfo{}
	for _, t := range c.tools {
		i := t.info()
		if (toolType != "" && i.ToolType != toolType) ||
			(namespace != "" && i.Namespace != namespace) ||
			(removeMeta && c.meta[i.ToolName]) {
			continue
		}
		out = append(out, i)
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

func (l *listTools) info() protocol.MCPToolInfo {
	return protocol.MCPToolInfo{
		ToolKey:     protocol.ToolKey(l.toolType, "list_tools"),
		ToolName:    "list_tools",
		Namespace:   metaNamespace,
		ToolType:    l.toolType,
		Title:       "List tools",
		Description: "Lists the tools of this device, filtered by tool_type and namespace; meta tools are left out unless remove_meta is false.",
		InputSchema: listToolsSchema,
	}
}

func (l *listTools) call(_ context.Context, params map[string]any) protocol.Result {
	var toolType, namespace string
	removeMeta := true
	for k, v := range params {
		var ok bool
		switch k {
		case "tool_type":
			toolType, ok = v.(string)
			ok = ok && (toolType == "" || protocol.ToolType(toolType).Valid())
		case "namespace":
			namespace, ok = v.(string)
		case "remove_meta":
			removeMeta, ok = v.(bool)
		default:
			return failure(fmt.Errorf("tool \"list_tools\": unknown parameter %q", k))
		}
		if !ok {
			return failure(fmt.Errorf("tool \"list_tools\": parameter %q: invalid value %v", k, v))
		}
	}
	tools := l.computer.ListTools(protocol.ToolType(toolType), namespace, removeMeta)
	return protocol.Result{Status: protocol.ResultSuccess, Result: tools}
}
