package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
)

// sidecar is the development form of a tool's self-description: NAME.json
// beside NAME.wasm.
type sidecar struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	ToolType    protocol.ToolType `json:"tool_type"`
	InputSchema map[string]any    `json:"input_schema"`
}

// wasmTool is a tool module loaded into the sandbox.
type wasmTool struct {
	sb        *sandbox.Sandbox
	mod       *sandbox.Tool
	namespace string
	desc      sidecar
}

func (t *wasmTool) info() protocol.MCPToolInfo {
	return protocol.MCPToolInfo{
		ToolKey:     protocol.ToolKey(t.desc.ToolType, t.desc.Name),
		ToolName:    t.desc.Name,
		Namespace:   t.namespace,
		ToolType:    t.desc.ToolType,
		Description: t.desc.Description,
		InputSchema: t.desc.InputSchema,
		Meta:        map[string]any{"sha256": t.mod.SHA256()},
	}
}

func (t *wasmTool) call(ctx context.Context, params map[string]any) protocol.Result {
	if params == nil {
		params = map[string]any{}
	}
	in, err := json.Marshal(params)
	if err != nil {
		return failure(fmt.Errorf("tool %q: parameters: %w", t.desc.Name, err))
	}
	out := t.sb.Call(ctx, t.mod, in)
	res := protocol.Result{
		Status: protocol.ResultSuccess,
		Usage: &protocol.Usage{
			Fuel:        out.Usage.Fuel,
			WallMicros:  out.Usage.Wall.Microseconds(),
			MemoryPages: out.Usage.MemoryPages,
			StdoutBytes: out.Usage.StdoutBytes,
		},
	}
	if out.Err != nil {
		res.Status, res.Error = protocol.ResultFailure, out.Err.Error()
		return res
	}
	res.Result = parseOutput(out.Stdout)
	return res
}

// parseOutput is the tool's result: JSON when stdout is JSON that the wire
// can carry, otherwise the text itself.
func parseOutput(stdout []byte) any {
	var v any
	if err := protocol.JSON.UnmarshalValue(stdout, &v); err == nil {
		return v
	}
	return string(stdout)
}

// toolDir is a directory of tool modules that forms one namespace.
type toolDir struct {
	Namespace string
	Path      string
}

// parseToolDir parses "DIR" or "NAMESPACE=DIR"; the namespace defaults to
// the directory's base name.
func parseToolDir(spec string) toolDir {
	if ns, dir, ok := strings.Cut(spec, "="); ok && ns != "" {
		return toolDir{Namespace: ns, Path: dir}
	}
	return toolDir{Namespace: filepath.Base(filepath.Clean(spec)), Path: spec}
}

// loadToolDir compiles every NAME.wasm that has a NAME.json beside it. A
// module that fails to load is logged and left out; the rest still load.
func loadToolDir(ctx context.Context, sb *sandbox.Sandbox, dir toolDir, log *slog.Logger) ([]tool, error) {
	paths, err := filepath.Glob(filepath.Join(dir.Path, "*.wasm"))
	if err != nil {
		return nil, fmt.Errorf("tools dir %s: %w", dir.Path, err)
	}
	if _, err := os.Stat(dir.Path); err != nil {
		return nil, fmt.Errorf("tools dir: %w", err)
	}
	sort.Strings(paths)
	var tools []tool
	for _, p := range paths {
		t, err := loadWasmTool(ctx, sb, dir.Namespace, p)
		if err != nil {
			log.Error("tool not loaded", "path", p, "err", err)
			continue
		}
		tools = append(tools, t)
	}
	return tools, nil
}

func loadWasmTool(ctx context.Context, sb *sandbox.Sandbox, namespace, path string) (*wasmTool, error) {
	desc, err := readSidecar(strings.TrimSuffix(path, ".wasm") + ".json")
	if err != nil {
		return nil, err
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	mod, err := sb.Load(ctx, desc.Name, wasm, sandbox.Limits{})
	if err != nil {
		return nil, err
	}
	return &wasmTool{sb: sb, mod: mod, namespace: namespace, desc: desc}, nil
}

func readSidecar(path string) (sidecar, error) {
	var d sidecar
	b, err := os.ReadFile(path)
	if err != nil {
		return d, fmt.Errorf("tool description: %w", err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("tool description %s: %w", path, err)
	}
	if d.Name == "" {
		return d, fmt.Errorf("tool description %s: field \"name\": missing", path)
	}
	if !d.ToolType.Valid() {
		return d, fmt.Errorf("tool description %s: field \"tool_type\": want data_collection or action, got %q", path, d.ToolType)
	}
	return d, nil
}
