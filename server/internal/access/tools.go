package access

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// ToolPattern allows tools by type and name: "TYPE::GLOB" as the agent
// keys its tools (tool_type::tool_name), or "GLOB" for a tool of any
// type. TYPE is action, data_collection or *; GLOB is a shell pattern on
// the tool's name (path.Match: *, ?, [a-z]).
type ToolPattern struct {
	// Type is the tool type allowed; "" allows any.
	Type string
	Name string
}

// The tool types a pattern may name: protocol's, which this package does
// not import.
var toolTypes = []string{"action", "data_collection"}

// ParseToolPattern reads "TYPE::GLOB" or "GLOB".
func ParseToolPattern(text string) (ToolPattern, error) {
	p := ToolPattern{Name: text}
	if typ, name, ok := strings.Cut(text, "::"); ok {
		p.Type, p.Name = typ, name
		if p.Type == "*" {
			p.Type = ""
		} else if !slices.Contains(toolTypes, p.Type) {
			return p, fmt.Errorf("%q: tool type %q: want action, data_collection or *", text, typ)
		}
	}
	if p.Name == "" {
		return p, fmt.Errorf("%q: no tool name pattern: want TYPE::GLOB or GLOB, e.g. data_collection::* or hash_*", text)
	}
	if _, err := path.Match(p.Name, ""); err != nil {
		return p, fmt.Errorf("%q: name pattern %q: %w", text, p.Name, err)
	}
	return p, nil
}

// Matches reports whether the pattern allows the tool name of type
// toolType; "" is a type not known, which only a pattern for any type
// allows.
func (p ToolPattern) Matches(toolType, name string) bool {
	if p.Type != "" && p.Type != toolType {
		return false
	}
	ok, _ := path.Match(p.Name, name)
	return ok
}

// String writes p as ParseToolPattern reads it.
func (p ToolPattern) String() string {
	if p.Type == "" {
		return p.Name
	}
	return p.Type + "::" + p.Name
}
