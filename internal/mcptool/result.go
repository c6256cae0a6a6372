package mcptool

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/mark3labs/mcp-go/mcp"
)

// Cut says where a result too large to return whole can be read whole.
type Cut struct {
	// MaxBytes bounds the result's JSON in a CallToolResult; 0: no bound.
	MaxBytes int
	// WholeAt is where the whole result is, such as the task's URL; empty:
	// nowhere but the device's log.
	WholeAt string
}

// Result is res as an MCP tool result: the AIP Result itself, usage
// included, as structuredContent; a short text summary of it, with the
// result's JSON, as content; and isError when it is not a success. A
// result whose JSON is over c.MaxBytes is cut: structuredContent then
// carries the Result without it and says so, and the text gives its first
// c.MaxBytes bytes, how large it was and where it is whole.
func Result(what string, res protocol.Result, c Cut) *mcp.CallToolResult {
	out := &mcp.CallToolResult{IsError: res.Status != protocol.ResultSuccess}
	value, size := resultJSON(res.Result)
	structured := res
	text := summary(what, res)
	if c.MaxBytes > 0 && size > c.MaxBytes {
		structured.Result = map[string]any{"cut": true, "bytes": size, "max_bytes": c.MaxBytes, "whole_at": c.WholeAt}
		text += fmt.Sprintf("\nThe result, %d bytes of JSON, is more than the %d this answer carries; its start follows.", size, c.MaxBytes)
		if c.WholeAt != "" {
			text += " The whole result is at " + c.WholeAt + "."
		}
		value = strings.ToValidUTF8(value[:c.MaxBytes], "")
	}
	if value != "" {
		text += "\n" + value
	}
	out.StructuredContent = structured
	out.Content = []mcp.Content{mcp.NewTextContent(text)}
	return out
}

// resultJSON is v as JSON, and its size; "" for no result.
func resultJSON(v any) (string, int) {
	if v == nil {
		return "", 0
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v), len(fmt.Sprint(v))
	}
	return string(b), len(b)
}

// summary is one line: what ran, how it ended, and what it used.
func summary(what string, res protocol.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", what, res.Status)
	if res.Error != "" {
		fmt.Fprintf(&b, ": %s", res.Error)
	}
	if u := res.Usage; u != nil {
		fmt.Fprintf(&b, " (fuel %d, wall time %s)", u.Fuel, (time.Duration(u.WallMicros) * time.Microsecond).String())
	}
	return b.String()
}
