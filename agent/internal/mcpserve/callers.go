package mcpserve

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// maxCallers bounds the sessions whose client is remembered.
const maxCallers = 1024

// callers remembers who each MCP session's client said it was when it
// initialized: a call names its session only.
type callers struct {
	mu    sync.Mutex
	names map[string]string // by session id
	order []string
}

// remember is an after-initialize hook.
func (c *callers) remember(ctx context.Context, _ any, req *mcp.InitializeRequest, _ *mcp.InitializeResult) {
	session := server.ClientSessionFromContext(ctx)
	if session == nil || req == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names == nil {
		c.names = map[string]string{}
	}
	if len(c.order) >= maxCallers {
		delete(c.names, c.order[0])
		c.order = c.order[1:]
	}
	c.names[session.SessionID()] = implementation(req.Params.ClientInfo)
	c.order = append(c.order, session.SessionID())
}

// of names the client of the call in ctx: as it named itself, and its
// HTTP client (aip-agent mcp-stdio says it is the bridge).
func (c *callers) of(ctx context.Context, h http.Header) string {
	name := ""
	if session := server.ClientSessionFromContext(ctx); session != nil {
		c.mu.Lock()
		name = c.names[session.SessionID()]
		c.mu.Unlock()
		if info, ok := session.(server.SessionWithClientInfo); ok && name == "" {
			name = implementation(info.GetClientInfo())
		}
	}
	if name == "" {
		name = "an unnamed MCP client"
	}
	if ua := h.Get("User-Agent"); ua != "" {
		name += " (" + ua + ")"
	}
	return name
}

func implementation(i mcp.Implementation) string {
	return strings.TrimSuffix(i.Name+"/"+i.Version, "/")
}
