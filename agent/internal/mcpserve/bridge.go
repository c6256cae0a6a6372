package mcpserve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// maxLine bounds one message the bridge reads from its client.
const maxLine = 16 << 20

// Bridge carries MCP messages between a client speaking on in and out
// (stdio: one JSON-RPC message a line) and the endpoint of the running
// agent at url, presenting token. It is a pipe, not a second agent: the
// agent runs the calls and reports them. Requests go out as they come,
// each in its own HTTP request, so that a cancellation can pass a long
// call; a notifications/cancelled also ends the request's HTTP request,
// which is how 2026-07-28 cancels over HTTP. Notifications the endpoint
// sends, progress and list_changed among them, come back on out. It
// returns when in ends or ctx does.
func Bridge(ctx context.Context, url, token, version string, in io.Reader, out io.Writer, log *slog.Logger) error {
	t, err := transport.NewStreamableHTTP(url, transport.WithContinuousListening(), transport.WithLogger(log),
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token, "User-Agent": "aip-agent-mcp-stdio/" + version}))
	if err != nil {
		return fmt.Errorf("mcp-stdio: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := &bridge{t: t, out: json.NewEncoder(out), log: log}
	t.SetNotificationHandler(func(n mcp.JSONRPCNotification) { b.write(n) })
	if err := t.Start(ctx); err != nil {
		return fmt.Errorf("mcp-stdio: %s: %w", url, err)
	}
	defer t.Close()
	var inflight sync.WaitGroup
	defer inflight.Wait()
	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 64<<10), maxLine)
	for lines.Scan() {
		if err := b.forward(ctx, lines.Bytes(), &inflight); err != nil {
			log.Warn("message from the client not forwarded", "err", err)
		}
	}
	cancel()
	return lines.Err()
}

// bridge is one client's pipe to the endpoint.
type bridge struct {
	t   *transport.StreamableHTTP
	log *slog.Logger

	mu  sync.Mutex // one message at a time on out
	out *json.Encoder

	inflight sync.Map    // the cancel func of each request's HTTP request, by its id
	modern   atomic.Bool // the client speaks 2026-07-28 or later
}

// message is what the bridge reads of a JSON-RPC message to route it.
type message struct {
	ID     *mcp.RequestId  `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// forward sends one line from the client on: a request in the
// background, a notification at once.
func (b *bridge) forward(ctx context.Context, line []byte, inflight *sync.WaitGroup) error {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		b.write(mcp.NewJSONRPCError(mcp.NewRequestId(nil), mcp.PARSE_ERROR, "not a JSON-RPC message: "+err.Error(), nil))
		return err
	}
	switch {
	case m.Method == "":
		return errors.New("a response to the server: the agent's endpoint asks clients nothing")
	case m.ID == nil:
		var n mcp.JSONRPCNotification
		if err := json.Unmarshal(line, &n); err != nil {
			return err
		}
		if n.Method == string(mcp.MethodNotificationCancelled) && b.cancel(n) && b.modern.Load() {
			// On 2026-07-28 over HTTP, ending the request is the
			// cancellation; the notification would be refused.
			return nil
		}
		return b.t.SendNotification(ctx, n)
	}
	reqCtx, cancel := context.WithCancel(ctx)
	b.inflight.Store(m.ID.String(), cancel)
	inflight.Go(func() {
		defer b.inflight.Delete(m.ID.String())
		defer cancel()
		b.request(reqCtx, m)
	})
	return nil
}

// cancel ends the HTTP request of the request n cancels, if it is in
// flight, and says whether it was.
func (b *bridge) cancel(n mcp.JSONRPCNotification) bool {
	id := mcp.NewRequestId(n.Params.AdditionalFields["requestId"])
	cancel, ok := b.inflight.LoadAndDelete(id.String())
	if ok {
		cancel.(context.CancelFunc)()
	}
	return ok
}

// request sends one request and writes its answer, or an error in its
// place if the endpoint could not be reached.
func (b *bridge) request(ctx context.Context, m message) {
	req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: *m.ID, Method: m.Method, Params: m.Params, Header: b.headers(m)}
	resp, err := b.t.SendRequest(ctx, req)
	if err != nil {
		b.write(mcp.NewJSONRPCError(*m.ID, mcp.INTERNAL_ERROR, "aip-agent mcp-stdio: the agent's MCP endpoint: "+err.Error(), nil))
		return
	}
	if m.Method == string(mcp.MethodInitialize) && resp.Error == nil {
		var init struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(resp.Result, &init) == nil {
			b.t.SetProtocolVersion(init.ProtocolVersion)
		}
	}
	b.write(resp)
}

// headers are the HTTP headers protocol 2026-07-28 asks of a request,
// which the client, speaking stdio, did not set: from the version its
// _meta declares.
func (b *bridge) headers(m message) http.Header {
	var p struct {
		Meta *mcp.Meta `json:"_meta"`
	}
	if json.Unmarshal(m.Params, &p) != nil || p.Meta.ProtocolVersion() == "" {
		return nil
	}
	version := p.Meta.ProtocolVersion()
	b.t.SetProtocolVersion(version)
	b.modern.Store(mcp.IsModernProtocol(version))
	h := http.Header{}
	for k, v := range mcp.StandardHeaders(version, mcp.MCPMethod(m.Method), m.Params) {
		h.Set(k, v)
	}
	return h
}

// write puts one message on out, on a line of its own.
func (b *bridge) write(v any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.out.Encode(v); err != nil {
		b.log.Warn("message to the client not written", "err", err)
	}
}
