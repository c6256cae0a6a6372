package protocol

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// fieldError names the field at fault and why.
func fieldError(field string, value any, problem string) error {
	if problem == "missing" {
		return fmt.Errorf("field %q: missing", field)
	}
	return fmt.Errorf("field %q: %s %q", field, problem, clip(fmt.Sprint(value)))
}

// clip shortens a value quoted back in an error: a hostile frame must not
// make its ERROR reply as big as itself.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
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
		if err := m.Actions[i].validate(i); err != nil {
			return err
		}
	}
	if m.Type == ServerRotateToken && m.Token == "" {
		return fieldError("token", nil, "missing")
	}
	if m.Type == ServerCancelCommand && m.ResponseID == "" {
		return fieldError("response_id", nil, "missing")
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
		if err := m.ActionResults[i].validate(i); err != nil {
			return err
		}
	}
	switch m.Type {
	case ClientLocalCall:
		return m.validateLocalCall()
	case ClientPreparing:
		return m.validatePreparing()
	}
	return nil
}

// validatePreparing checks that a preparing message names its command,
// the tool and a stage it knows, and a step within the steps.
func (m *ClientMessage) validatePreparing() error {
	p := m.Preparing
	switch {
	case m.PrevResponseID == "":
		return fieldError("prev_response_id", nil, "missing")
	case p == nil:
		return fieldError("preparing", nil, "missing")
	case p.ToolName == "":
		return fieldError("preparing.tool_name", nil, "missing")
	case !slices.Contains(PreparingStages[:], p.Stage):
		return fieldError("preparing.stage", p.Stage, "unknown value")
	case p.Step > p.Steps:
		return fieldError("preparing.step", p.Step, fmt.Sprintf("want at most steps (%d), got", p.Steps))
	}
	return nil
}

// validateLocalCall checks that a local_call names the calls it reports,
// one result for each.
func (m *ClientMessage) validateLocalCall() error {
	if len(m.Actions) == 0 {
		return fieldError("actions", nil, "missing")
	}
	for i := range m.Actions {
		if err := m.Actions[i].validate(i); err != nil {
			return err
		}
	}
	if len(m.ActionResults) != len(m.Actions) {
		return fieldError("action_results", len(m.ActionResults), fmt.Sprintf("want one for each of the %d actions, got", len(m.Actions)))
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

// validate checks actions[i] of a ServerMessage. The path is built only
// on error: validation runs for every frame.
func (c *Command) validate(i int) error {
	if c.ToolName == "" {
		return fieldError("actions["+strconv.Itoa(i)+"].tool_name", nil, "missing")
	}
	if c.ToolType != "" && !c.ToolType.Valid() {
		return fieldError("actions["+strconv.Itoa(i)+"].tool_type", c.ToolType, "unknown value")
	}
	return nil
}

// validate checks action_results[i] of a ClientMessage.
func (r *Result) validate(i int) error {
	if r.Status == "" {
		return fieldError("action_results["+strconv.Itoa(i)+"].status", nil, "missing")
	}
	if !r.Status.valid() {
		return fieldError("action_results["+strconv.Itoa(i)+"].status", r.Status, "unknown value")
	}
	return nil
}

// checkUTF8 finds the first string in v, a key or a value at any depth,
// that is not valid UTF-8. Both decoders reject such a frame, and the CBOR
// encoder would send it as it is.
func checkUTF8(v any) error {
	if path, bad := invalidUTF8(reflect.ValueOf(v)); bad {
		return fmt.Errorf("field %q: invalid UTF-8", path)
	}
	return nil
}

// withValidUTF8 returns a copy of m with every invalid UTF-8 sequence
// replaced by U+FFFD. It goes through JSON, whose encoder replaces them:
// this path is rare (a tool printing bytes that are not text), so the
// copy's one cost, a float such as 2.0 becoming the integer 2, is fine.
func withValidUTF8(m Message) (Message, error) {
	b, err := marshalJSON(m)
	if err != nil {
		return nil, err
	}
	clean := reflect.New(reflect.TypeOf(m).Elem()).Interface().(Message)
	if err := JSON.Unmarshal(b, clean); err != nil {
		return nil, err
	}
	return clean, nil
}

// invalidUTF8 reports whether v holds a string that is not valid UTF-8,
// and its path below v. Every message sent is checked and almost none
// has one, so the path is built only for a bad string, on the way back
// out: the walk allocates nothing.
func invalidUTF8(v reflect.Value) (string, bool) {
	switch v.Kind() {
	case reflect.String:
		return "", !utf8.ValidString(v.String())
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return invalidUTF8(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if p, bad := invalidUTF8(v.Field(i)); bad {
				return join(wireName(v.Type().Field(i)), p), true
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return "", false // bytes, not text
		}
		for i := range v.Len() {
			if p, bad := invalidUTF8(v.Index(i)); bad {
				return join("["+strconv.Itoa(i)+"]", p), true
			}
		}
	case reflect.Map:
		if m, ok := anyMap(v); ok {
			return invalidUTF8InMap(m)
		}
		for it := v.MapRange(); it.Next(); {
			if k := it.Key(); k.Kind() == reflect.String && !utf8.ValidString(k.String()) {
				return "", true
			}
			if p, bad := invalidUTF8(it.Value()); bad {
				return join(fmt.Sprint(it.Key()), p), true
			}
		}
	}
	return "", false
}

// anyMap is v as a map[string]any, the map of parameters and results,
// if it is one: ranged over directly, it costs no allocation per entry,
// as reflect's iterator does.
func anyMap(v reflect.Value) (map[string]any, bool) {
	if !v.CanInterface() {
		return nil, false
	}
	m, ok := v.Interface().(map[string]any)
	return m, ok
}

// invalidUTF8InMap is invalidUTF8 for a map[string]any. A bad key is
// reported at the map.
func invalidUTF8InMap(m map[string]any) (string, bool) {
	for k, val := range m {
		if !utf8.ValidString(k) {
			return "", true
		}
		if p, bad := invalidUTF8(reflect.ValueOf(val)); bad {
			return join(k, p), true
		}
	}
	return "", false
}

// join is the path of rest below key.
func join(key, rest string) string {
	if rest == "" || strings.HasPrefix(rest, "[") {
		return key + rest
	}
	return key + "." + rest
}

// wireName is a struct field's key on the wire.
func wireName(f reflect.StructField) string {
	if tag, ok := f.Tag.Lookup("json"); ok {
		if name, _, _ := strings.Cut(tag, ","); name != "" {
			return name
		}
	}
	return f.Name
}
