package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/edgeaip/edgeaip/internal/suggest"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
)

// keyValue is one KEY=VALUE argument of exec.
type keyValue struct{ key, value string }

// splitParams reads KEY=VALUE arguments.
func splitParams(args []string) ([]keyValue, error) {
	kvs := make([]keyValue, len(args))
	for i, kv := range args {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("parameter %q: want KEY=VALUE", kv)
		}
		kvs[i] = keyValue{k, v}
	}
	return kvs, nil
}

// paramsObject reads --params: a JSON object, or nothing.
func paramsObject(paramsJSON string) (map[string]any, error) {
	params := map[string]any{}
	if paramsJSON == "" {
		return params, nil
	}
	// JSON null decodes into a map without error, leaving it nil.
	params = nil
	if err := json.Unmarshal([]byte(paramsJSON), &params); err != nil {
		return nil, fmt.Errorf("--params: not a JSON object: %w", err)
	}
	if params == nil {
		return nil, fmt.Errorf("--params: not a JSON object: %s", paramsJSON)
	}
	return params, nil
}

// toolSchema is the input schema of the tool a device lists as name (of
// type tt, if given), as the agent finds it: data_collection first. It is
// nil if the device lists no tools, as UFO's device client does not: the
// device then checks its commands itself. A tool the device does not list
// is a usage error, with the name it most likely meant.
func toolSchema(ctx context.Context, c *api.Client, device, name string, tt protocol.ToolType) (map[string]any, error) {
	tools, err := c.DeviceTools(ctx, device)
	var se *api.StatusError
	switch {
	case errors.As(err, &se) && se.Code == http.StatusNotFound:
		return nil, &exitError{exitUsage, fmt.Errorf("device %s is not enrolled", device)}
	case err != nil:
		return nil, apiFailure(err)
	case len(tools) == 0:
		return nil, nil
	}
	types := protocol.ToolTypes[:]
	if tt != "" {
		types = []protocol.ToolType{tt}
	}
	for _, want := range types {
		for _, t := range tools {
			if t.ToolName == name && t.ToolType == want {
				return t.InputSchema, nil
			}
		}
	}
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		if tt == "" || t.ToolType == tt {
			names = append(names, t.ToolName)
		}
	}
	of := ""
	if tt != "" {
		of = " of type " + string(tt)
	}
	return nil, &exitError{exitUsage, fmt.Errorf("device %s has no tool %s%s%s", device, name, of, suggest.DidYouMean(name, slices.Compact(slices.Sorted(slices.Values(names)))))}
}

// buildParams merges --params with KEY=VALUE arguments, each VALUE typed
// by schema (see typedParams; nil types none).
func buildParams(paramsJSON string, args []string, schema map[string]any) (map[string]any, []string, error) {
	kvs, err := splitParams(args)
	if err != nil {
		return nil, nil, err
	}
	base, err := paramsObject(paramsJSON)
	if err != nil {
		return nil, nil, err
	}
	return typedParams(base, kvs, schema)
}

// typedParams merges KEY=VALUE arguments into base, each VALUE taken as
// the type schema gives its parameter, and says which were taken
// otherwise than as they read (as JSON when they are JSON, else as text).
func typedParams(base map[string]any, kvs []keyValue, schema map[string]any) (map[string]any, []string, error) {
	props, _ := schema["properties"].(map[string]any)
	var coerced []string
	for _, kv := range kvs {
		guess := jsonOrText(kv.value)
		prop, _ := props[kv.key].(map[string]any)
		typ, _ := prop["type"].(string)
		v, err := typedValue(kv.value, typ, guess)
		if err != nil {
			return nil, nil, fmt.Errorf("parameter %s=%s: %w", kv.key, kv.value, err)
		}
		if !sameJSON(v, guess) {
			coerced = append(coerced, fmt.Sprintf("%s=%s: taken as %s %s, as the tool's schema types it", kv.key, kv.value, article(typ), jsonText(v)))
		}
		base[kv.key] = v
	}
	return base, coerced, nil
}

// typedValue is text as the JSON type typ, or guess if typ names none.
func typedValue(text, typ string, guess any) (any, error) {
	switch typ {
	case "string":
		return text, nil
	case "integer":
		if n, err := strconv.ParseInt(text, 10, 64); err == nil {
			return n, nil
		}
		return nil, errors.New("want a whole number")
	case "number":
		if f, err := strconv.ParseFloat(text, 64); err == nil {
			return f, nil
		}
		return nil, errors.New("want a number")
	case "boolean":
		if b, err := strconv.ParseBool(text); err == nil {
			return b, nil
		}
		return nil, errors.New("want true or false")
	case "array", "object":
		var v any
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			return nil, fmt.Errorf("want %s %s, as JSON", article(typ), typ)
		}
		return v, nil
	}
	return guess, nil
}

// jsonOrText reads v as JSON when it is JSON, else as text.
func jsonOrText(v string) any {
	var j any
	if err := json.Unmarshal([]byte(v), &j); err == nil {
		return j
	}
	return v
}

func sameJSON(a, b any) bool { return jsonText(a) == jsonText(b) }

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func article(typ string) string {
	switch typ {
	case "integer", "array", "object":
		return "an " + typ
	}
	return "a " + typ
}
