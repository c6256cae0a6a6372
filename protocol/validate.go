package protocol

import "fmt"

// fieldError names the field at fault and why.
func fieldError(field string, value any, problem string) error {
	if problem == "missing" {
		return fmt.Errorf("field %q: missing", field)
	}
	return fmt.Errorf("field %q: %s %q", field, problem, fmt.Sprint(value))
}

// Validate implements [Message].
func (m *ServerMessage) Validate() error {
	if m.Type == "" {
		return fieldError("type", nil, "missing")
	}
	if !m.Type.valid() {
		return fieldError("type", m.Type, "unknown value")
	}
	if err := validateStatus(m.Status); err != nil {
		return err
	}
	for i := range m.Actions {
		if err := m.Actions[i].validate(fmt.Sprintf("actions[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

// Validate implements [Message].
func (m *ClientMessage) Validate() error {
	if m.Type == "" {
		return fieldError("type", nil, "missing")
	}
	if !m.Type.valid() {
		return fieldError("type", m.Type, "unknown value")
	}
	if err := validateStatus(m.Status); err != nil {
		return err
	}
	if m.ClientType != "" && !m.ClientType.valid() {
		return fieldError("client_type", m.ClientType, "unknown value")
	}
	for i := range m.ActionResults {
		if err := m.ActionResults[i].validate(fmt.Sprintf("action_results[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

// applyDefaults gives ClientType UFO's default, device.
func (m *ClientMessage) applyDefaults() {
	if m.ClientType == "" {
		m.ClientType = ClientDevice
	}
}

func validateStatus(s TaskStatus) error {
	if s == "" {
		return fieldError("status", nil, "missing")
	}
	if !s.valid() {
		return fieldError("status", s, "unknown value")
	}
	return nil
}

func (c *Command) validate(path string) error {
	if c.ToolName == "" {
		return fieldError(path+".tool_name", nil, "missing")
	}
	if c.ToolType != "" && !c.ToolType.Valid() {
		return fieldError(path+".tool_type", c.ToolType, "unknown value")
	}
	return nil
}

func (r *Result) validate(path string) error {
	if r.Status == "" {
		return fieldError(path+".status", nil, "missing")
	}
	if !r.Status.valid() {
		return fieldError(path+".status", r.Status, "unknown value")
	}
	return nil
}
