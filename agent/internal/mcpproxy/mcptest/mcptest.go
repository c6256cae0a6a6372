// Package mcptest is the tests' own MCP server, built with mcp-go's server
// package, with tools that add, echo, nap, crash, count their calls, meet
// at a barrier and grow the tool list. A test binary whose TestMain calls
// Main serves it over stdio when run by Stdio's config, so that the proxy
// can spawn it, crash it and watch it restart; HTTP serves it over
// streamable HTTP. The npm servers of mcpproxy's tests check the proxy
// against servers written by others.
package mcptest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// serverEnv, set, makes the test binary the MCP server.
const serverEnv = "AIP_TEST_MCP_SERVER"

// Main is a TestMain: it runs the tests, or, in the process Stdio's
// config starts, serves the test MCP server over stdio.
func Main(m *testing.M) {
	if os.Getenv(serverEnv) != "" {
		fmt.Fprintln(os.Stderr, "test MCP server up, pid", os.Getpid())
		if err := server.ServeStdio(newServer()); err != nil {
			fmt.Fprintln(os.Stderr, "test MCP server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Stdio is the config of the test MCP server over stdio: the test binary,
// run again. Its TestMain must call Main.
func Stdio(t testing.TB, namespace string) config.MCPServerConfig {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return config.MCPServerConfig{Namespace: namespace, Type: config.MCPStdio, Command: exe,
		Env: map[string]string{serverEnv: "1"}, Timeout: 10 * time.Second}
}

// HTTP serves the test MCP server over streamable HTTP until the test
// ends, and is its config.
func HTTP(t testing.TB, namespace string) config.MCPServerConfig {
	hs := httptest.NewServer(server.NewStreamableHTTPServer(newServer()))
	t.Cleanup(hs.Close)
	return config.MCPServerConfig{Namespace: namespace, Type: config.MCPHTTP, URL: hs.URL + "/mcp", Timeout: 10 * time.Second}
}

// barriers lets concurrent calls of the barrier tool meet.
type barriers struct {
	mu     sync.Mutex
	groups map[string]*barrier
}

type barrier struct {
	waiting int
	met     chan struct{}
}

// meet waits up to d for n calls of group to be waiting at once.
func (b *barriers) meet(group string, n int, d time.Duration) bool {
	b.mu.Lock()
	g := b.groups[group]
	if g == nil {
		g = &barrier{met: make(chan struct{})}
		b.groups[group] = g
	}
	if g.waiting++; g.waiting == n {
		close(g.met)
		delete(b.groups, group)
	}
	b.mu.Unlock()
	select {
	case <-g.met:
		return true
	case <-time.After(d):
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-g.met:
		return true
	default:
	}
	g.waiting--
	return false
}

func newServer() *server.MCPServer {
	s := server.NewMCPServer("edgeaip-test", "1.0", server.WithToolCapabilities(true), server.WithPaginationLimit(3))
	text := func(t string) *mcp.CallToolResult { return mcp.NewToolResultText(t) }
	s.AddTool(mcp.NewTool("add", mcp.WithDescription("adds a and b"),
		mcp.WithNumber("a", mcp.Required()), mcp.WithNumber("b", mcp.Required())),
		func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a, b := r.GetFloat("a", 0), r.GetFloat("b", 0)
			return mcp.NewToolResultStructured(map[string]any{"sum": a + b}, fmt.Sprint(a+b)), nil
		})
	s.AddTool(mcp.NewTool("say", mcp.WithString("text", mcp.Required())),
		func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(r.GetString("text", "")), nil
		})
	s.AddTool(mcp.NewTool("picture"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewImageContent("iVBORw0KGgo=", "image/png")}}, nil
	})
	s.AddTool(mcp.NewTool("broken"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("it broke"), nil
	})
	s.AddTool(mcp.NewTool("nap", mcp.WithNumber("ms", mcp.Required())),
		func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-time.After(time.Duration(r.GetFloat("ms", 0)) * time.Millisecond):
			case <-ctx.Done():
			}
			return text("napped"), nil
		})
	s.AddTool(mcp.NewTool("crash"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		fmt.Fprintln(os.Stderr, "crashing on purpose")
		os.Exit(3)
		return nil, nil
	})
	s.AddTool(mcp.NewTool("pid"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultStructured(map[string]any{"pid": os.Getpid()}, ""), nil
	})
	var calls atomic.Int64
	s.AddTool(mcp.NewTool("count", mcp.WithDescription("counts its calls in this process")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultStructured(map[string]any{"calls": calls.Add(1)}, ""), nil
		})
	var extra int
	var extraMu sync.Mutex
	s.AddTool(mcp.NewTool("grow", mcp.WithDescription("adds a tool, so that the tool list changes")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			extraMu.Lock()
			extra++
			name := fmt.Sprintf("extra_%d", extra)
			extraMu.Unlock()
			s.AddTool(mcp.NewTool(name), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return text(name), nil
			})
			return text(name), nil
		})
	bs := &barriers{groups: map[string]*barrier{}}
	s.AddTool(mcp.NewTool("barrier", mcp.WithDescription("returns once n calls of the group have arrived"),
		mcp.WithString("group", mcp.Required()), mcp.WithNumber("n", mcp.Required()), mcp.WithNumber("wait_ms", mcp.Required())),
		func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			wait := time.Duration(r.GetFloat("wait_ms", 0)) * time.Millisecond
			if bs.meet(r.GetString("group", ""), int(r.GetFloat("n", 0)), wait) {
				return text("met"), nil
			}
			return mcp.NewToolResultError("the others did not come"), nil
		})
	return s
}
