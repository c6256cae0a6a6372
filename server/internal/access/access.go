// Package access is what an operator identity may do: its role, and the
// scope that narrows it, a device label selector and a tool allow-list.
// It decides; it does no I/O. The server holds every surface to these
// answers (the HTTP API, constellation clients, event streams, the
// dashboard); see server/internal/identity/RATIONALE.md, "Identities".
package access

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Role is how much an identity may do. Each role may do all that the
// roles below it may.
type Role int

// The roles, from least to most.
const (
	// Viewer reads: devices, tools, tasks, the audit log, task events,
	// metrics.
	Viewer Role = iota + 1
	// Operator also runs things: commands, plans, fleets, cancellations.
	Operator
	// Deployer also deploys tools to devices.
	Deployer
	// Admin may do everything, identities and enrollment included.
	Admin
)

var roleNames = map[Role]string{Viewer: "viewer", Operator: "operator", Deployer: "deployer", Admin: "admin"}

// Roles lists the roles from least to most.
func Roles() []Role { return []Role{Viewer, Operator, Deployer, Admin} }

// String is the role's name, as the API writes it.
func (r Role) String() string {
	if n, ok := roleNames[r]; ok {
		return n
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if n == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("%q: want viewer, operator, deployer or admin", s)
}

// Covers reports whether r may do what need may.
func (r Role) Covers(need Role) bool { return r >= need }

// Scope narrows a role to some devices and some tools. The zero Scope
// narrows nothing.
type Scope struct {
	// Devices picks the devices in scope by their labels; empty: all.
	Devices Selector
	// Tools are the tools that may be called, and listed; empty: all.
	Tools []ToolPattern
}

// ParseScope reads a scope as the API gives it: a selector and tool
// patterns. Its error is a *FieldError naming the field at fault:
// "devices", "tools[i]", or none for a scope that narrows nothing, which
// is an error: leave it out instead.
func ParseScope(devices string, tools []string) (Scope, error) {
	var s Scope
	var err error
	if s.Devices, err = ParseSelector(devices); err != nil {
		return Scope{}, &FieldError{Field: "devices", Err: err}
	}
	for i, t := range tools {
		p, err := ParseToolPattern(t)
		if err != nil {
			return Scope{}, &FieldError{Field: fmt.Sprintf("tools[%d]", i), Err: err}
		}
		s.Tools = append(s.Tools, p)
	}
	if s.Unscoped() {
		return Scope{}, &FieldError{Err: errors.New("empty: give devices, tools or both, or no scope at all")}
	}
	return s, nil
}

// FieldError is a scope's field that does not parse; Field is empty when
// the fault is the scope's as a whole.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("field %q: %v", e.Field, e.Err)
}

func (e *FieldError) Unwrap() error { return e.Err }

// Unscoped reports whether s narrows nothing.
func (s Scope) Unscoped() bool { return len(s.Devices) == 0 && len(s.Tools) == 0 }

// Device reports whether a device with labels is in scope.
func (s Scope) Device(labels map[string]string) bool { return s.Devices.Matches(labels) }

// Tool reports whether the tool name of type toolType may be called and
// listed. An empty toolType is a tool whose type is not known: only a
// pattern for any type takes it.
func (s Scope) Tool(toolType, name string) bool {
	if len(s.Tools) == 0 {
		return true
	}
	return slices.ContainsFunc(s.Tools, func(p ToolPattern) bool { return p.Matches(toolType, name) })
}

// ToolStrings are the tool patterns as the API writes them.
func (s Scope) ToolStrings() []string {
	out := make([]string, len(s.Tools))
	for i, p := range s.Tools {
		out[i] = p.String()
	}
	return out
}

// String describes s for logs and errors: "devices site=lobby, tools
// data_collection::*", or "unscoped".
func (s Scope) String() string {
	var parts []string
	if len(s.Devices) > 0 {
		parts = append(parts, "devices "+s.Devices.String())
	}
	if len(s.Tools) > 0 {
		parts = append(parts, "tools "+strings.Join(s.ToolStrings(), ","))
	}
	if len(parts) == 0 {
		return "unscoped"
	}
	return strings.Join(parts, ", ")
}
