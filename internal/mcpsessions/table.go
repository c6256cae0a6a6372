// Package mcpsessions bounds the sessions an MCP endpoint served by
// mcp-go's Streamable HTTP server keeps: each initialize of the
// initialize-era revisions makes one, held until its DELETE (and by mcp-go
// ~12.5 KB each), which a client that never sends one, or a hostile one,
// would pile up without end. A Table holds an endpoint's sessions under
// two bounds, per owner (an identity) and in all. A new session past a
// bound takes the place of the oldest idle one, the owner's own for the
// owner's bound; when every one is busy (a request running, or its stream
// of notifications open) it is refused with 429 and Retry-After. A
// request on a session not held (ended, or never issued) is 404, and one
// that names no session where it needs one 400, as the Streamable HTTP
// transport says. The server's gateway and the agent's local endpoint
// both use it; see the MCP gateway's RATIONALE.md, "Sessions are
// bounded" and "Sessions answer as the transport says".
package mcpsessions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Bound names the bound a session was evicted or refused for.
type Bound string

// The bounds.
const (
	// PerOwner is one owner's (one identity's) bound.
	PerOwner Bound = "identity"
	// Total is the endpoint's bound, over every owner.
	Total Bound = "node"
)

// RetryAfter is what a refusal asks the client to wait: sessions are
// refused only when all are busy, and no event says when one will end.
const RetryAfter = 10 * time.Second

// Config is a Table's bounds and what it tells of them.
type Config struct {
	// MaxPerOwner bounds one owner's sessions; 0: only MaxTotal does.
	MaxPerOwner int
	// MaxTotal bounds the sessions of every owner together; 0: no bound.
	MaxTotal int
	// Evicted and Refused, if set, count each session evicted or refused,
	// with the bound that made it so (metrics).
	Evicted func(Bound)
	Refused func(Bound)
	// Log receives a line when an owner first reaches a bound.
	Log *slog.Logger
}

// Table holds the sessions of one or more mcp-go endpoints (the server
// has one per identity's view) within its bounds.
type Table struct {
	cfg Config

	mu       sync.Mutex
	sessions map[sessionKey]*session
	owners   map[string]*owner
	total    int    // sessions and reservations
	seq      uint64 // orders uses: the oldest idle session has the least
	nodeFull bool   // at MaxTotal since last logged: log once
}

// sessionKey names a session: its owner's, so that an id presented to
// another owner's endpoint is not taken for it.
type sessionKey struct{ owner, id string }

// session is one session held.
type session struct {
	owner *owner
	end   func() // ends it in mcp-go
	busy  int    // requests running on it, its stream among them
	used  uint64 // Table.seq when a request on it last ended
}

// owner is what one owner holds.
type owner struct {
	name string
	held int  // sessions and reservations
	full bool // at a bound since last logged: log once
}

// New is an empty Table with cfg's bounds.
func New(cfg Config) *Table {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Table{cfg: cfg, sessions: map[sessionKey]*session{}, owners: map[string]*owner{}}
}

// Guard is h, one mcp-go endpoint, whose sessions all belong to name,
// held in t: hooks must be the hooks h's MCPServer was made with (they
// are added to, so call Guard before serving). An initialize, which
// opens a session, is admitted within the bounds first; a request on a
// session not held is 404, and one that needs a session and names none
// 400.
func (t *Table) Guard(name string, hooks *server.Hooks, h http.Handler) http.Handler {
	end := func(id string) func() { return func() { terminate(h, id) } }
	key := func(s server.ClientSession) sessionKey { return sessionKey{name, s.SessionID()} }
	// Held as it initializes, before its client has the answer (mcp-go
	// registers it only after answering), and as mcp-go registers one
	// that did not (a failed initialize, or a stream's).
	hooks.AddAfterInitialize(func(ctx context.Context, _ any, _ *mcp.InitializeRequest, _ *mcp.InitializeResult) {
		if s := server.ClientSessionFromContext(ctx); s != nil && s.SessionID() != "" {
			t.registered(ctx, key(s), end(s.SessionID()))
		}
	})
	hooks.AddOnRegisterSession(func(ctx context.Context, s server.ClientSession) {
		t.registered(ctx, key(s), end(s.SessionID()))
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, s server.ClientSession) { t.unregistered(key(s)) })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind, err := t.classify(name, r)
		switch {
		case err != nil:
			status := http.StatusBadRequest
			if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
				status = http.StatusRequestEntityTooLarge
			}
			http.Error(w, err.Error(), status)
		case kind == noSessionID:
			http.Error(w, "missing the "+server.HeaderKeySessionID+" header: initialize a session first", http.StatusBadRequest)
		case kind == unknownSession:
			http.Error(w, "no session "+r.Header.Get(server.HeaderKeySessionID)+
				": it ended (DELETE, idle, evicted, or the server restarted) or was never issued; initialize a new one", http.StatusNotFound)
		case kind == sessionless:
			h.ServeHTTP(w, r)
		case kind == onSession:
			t.serveOn(name, w, r, h)
		default:
			tk, bound, ok := t.reserve(name)
			if !ok {
				t.refuse(w, bound)
				return
			}
			defer t.release(tk)
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ticketKey{}, tk)))
		}
	})
}

// ticket is a place reserved for a session being opened: the session
// takes it when mcp-go registers it, or it is released.
type ticket struct {
	owner *owner
	taken bool // under Table.mu
}

type ticketKey struct{}

// requestKind is what a request is to the sessions of its endpoint.
type requestKind int

const (
	// opens a session: an initialize.
	opens requestKind = iota
	// onSession: on a session held.
	onSession
	// sessionless: a request of revision 2026-07-28, which has no
	// sessions, or one mcp-go is to answer (a body that does not parse,
	// a method other than GET, POST and DELETE).
	sessionless
	// noSessionID: a request that needs a session and names none: 400,
	// as the Streamable HTTP transport says.
	noSessionID
	// unknownSession: a request on a session not held, whether it ended
	// (DELETE, idle, evicted) or was never issued: 404, on which the
	// client initializes a new one, as the transport says.
	unknownSession
)

// classify says what r, to name's endpoint, is to its sessions. r's body
// is read, and put back.
func (t *Table) classify(name string, r *http.Request) (requestKind, error) {
	if mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
		return sessionless, nil
	}
	switch r.Method {
	case http.MethodPost:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return 0, fmt.Errorf("reading an MCP message: %w", err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
			Params struct {
				Meta *mcp.Meta `json:"_meta"`
			} `json:"params"`
		}
		switch {
		case json.Unmarshal(body, &m) != nil, mcp.IsModernProtocol(m.Params.Meta.ProtocolVersion()), m.Method == "server/discover":
			return sessionless, nil
		case m.Method == string(mcp.MethodInitialize):
			return opens, nil
		}
	case http.MethodGet, http.MethodDelete:
	default:
		return sessionless, nil
	}
	id := r.Header.Get(server.HeaderKeySessionID)
	if id == "" {
		return noSessionID, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sessions[sessionKey{name, id}] == nil {
		return unknownSession, nil
	}
	return onSession, nil
}

// serveOn serves r, to name's endpoint, marking the session it names
// busy meanwhile.
func (t *Table) serveOn(name string, w http.ResponseWriter, r *http.Request, h http.Handler) {
	t.mu.Lock()
	s := t.sessions[sessionKey{name, r.Header.Get(server.HeaderKeySessionID)}]
	if s != nil {
		s.busy++
	}
	t.mu.Unlock()
	defer func() {
		if s == nil {
			return
		}
		t.mu.Lock()
		s.busy--
		t.seq++
		s.used = t.seq
		t.mu.Unlock()
	}()
	h.ServeHTTP(w, r)
}

// refuse answers 429 for bound.
func (t *Table) refuse(w http.ResponseWriter, bound Bound) {
	if t.cfg.Refused != nil {
		t.cfg.Refused(bound)
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(RetryAfter.Seconds())))
	msg := "too many MCP sessions of this identity, all busy: end one (DELETE) or try again later"
	if bound == Total {
		msg = "too many MCP sessions on this node, all busy: try again later"
	}
	http.Error(w, msg, http.StatusTooManyRequests)
}
