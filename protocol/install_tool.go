package protocol

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// The agent's meta tool that installs a tool module the server pushes: a
// COMMAND action with tool_name InstallToolName and tool_type action,
// whose parameters InstallToolParams builds.
const (
	InstallToolName = "install_tool"
	// DefaultDeployNamespace is where a module goes when no namespace is
	// named.
	DefaultDeployNamespace = "deployed"
	// MaxModuleBytes caps a pushed module, before compression.
	MaxModuleBytes = 32 << 20
)

// InstallToolParams builds install_tool's parameters: the module, gzipped
// then base64-encoded so that a Go module of a few MB fits one frame; its
// SHA-256, which the agent checks; and the namespace it goes into (empty
// for DefaultDeployNamespace).
func InstallToolParams(wasm []byte, namespace string) (map[string]any, error) {
	if len(wasm) > MaxModuleBytes {
		return nil, fmt.Errorf("module is %d bytes, above the %d a device takes", len(wasm), MaxModuleBytes)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(wasm); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(wasm)
	params := map[string]any{
		"module": base64.StdEncoding.EncodeToString(buf.Bytes()),
		"sha256": hex.EncodeToString(sum[:]),
	}
	if namespace != "" {
		params["namespace"] = namespace
	}
	return params, nil
}

// InstallToolSchema is the input schema of install_tool.
var InstallToolSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"module":    map[string]any{"type": "string", "description": "the module, gzipped, base64-encoded"},
		"sha256":    map[string]any{"type": "string", "description": "hex SHA-256 of the module before compression"},
		"namespace": map[string]any{"type": "string", "description": "namespace to install into (default " + DefaultDeployNamespace + ")"},
		"force":     map[string]any{"type": "boolean", "description": "override the tool of that name a rollout put on the device (drift until the rollout's next revision)"},
	},
	"required":             []any{"module", "sha256"},
	"additionalProperties": false,
}

// InstalledModule decodes install_tool's parameters: the module, checked
// against its digest and MaxModuleBytes, and its namespace.
func InstalledModule(params map[string]any) (wasm []byte, namespace string, err error) {
	enc, ok := params["module"].(string)
	if !ok {
		return nil, "", errors.New("parameter \"module\": missing or not a string")
	}
	want, ok := params["sha256"].(string)
	if !ok {
		return nil, "", errors.New("parameter \"sha256\": missing or not a string")
	}
	if ns, present := params["namespace"]; present {
		if namespace, ok = ns.(string); !ok {
			return nil, "", errors.New("parameter \"namespace\": not a string")
		}
	}
	gz, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, "", fmt.Errorf("parameter \"module\": base64: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, "", fmt.Errorf("parameter \"module\": gzip: %w", err)
	}
	wasm, err = io.ReadAll(io.LimitReader(zr, MaxModuleBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("parameter \"module\": gzip: %w", err)
	}
	if len(wasm) > MaxModuleBytes {
		return nil, "", fmt.Errorf("parameter \"module\": more than %d bytes once decompressed", MaxModuleBytes)
	}
	if sum := sha256.Sum256(wasm); hex.EncodeToString(sum[:]) != want {
		return nil, "", fmt.Errorf("parameter \"sha256\": the module's digest is %x, not %s", sum, want)
	}
	return wasm, namespace, nil
}
