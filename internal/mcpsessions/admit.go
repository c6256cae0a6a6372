package mcpsessions

import (
	"context"
	"net/http"

	"github.com/mark3labs/mcp-go/server"
)

// reserve makes room for a session of name, evicting the oldest idle
// session the bound that is reached allows, and reserves it; or says
// which bound refuses it, every session under it being busy.
func (t *Table) reserve(name string) (*ticket, Bound, bool) {
	t.mu.Lock()
	o := t.owner(name)
	var ends []func()
	var refused Bound
	if max := t.cfg.MaxPerOwner; max > 0 && o.held >= max {
		refused = t.makeRoom(o, PerOwner, &ends)
	}
	if max := t.cfg.MaxTotal; refused == "" && max > 0 && t.total >= max {
		refused = t.makeRoom(nil, Total, &ends)
	}
	var tk *ticket
	if refused == "" {
		tk = &ticket{owner: o}
		o.held++
		t.total++
		t.owners[name] = o // again, if evicting its last session forgot it
	} else {
		t.dropIfEmpty(o)
	}
	t.mu.Unlock()
	for _, end := range ends {
		end()
	}
	return tk, refused, refused == ""
}

// makeRoom evicts the oldest idle session of o (nil: of anyone), which
// bound asks, adding what ends it in mcp-go to ends; or returns bound if
// none is idle. t.mu is held.
func (t *Table) makeRoom(o *owner, bound Bound, ends *[]func()) Bound {
	var victimKey sessionKey
	var victim *session
	for k, s := range t.sessions {
		if s.busy == 0 && (o == nil || s.owner == o) && (victim == nil || s.used < victim.used) {
			victimKey, victim = k, s
		}
	}
	t.atBound(o, bound)
	if victim == nil {
		return bound
	}
	t.forget(victimKey, victim)
	*ends = append(*ends, victim.end)
	if t.cfg.Evicted != nil {
		t.cfg.Evicted(bound)
	}
	return ""
}

// atBound logs that o (nil: the node) reached bound, once until it is
// below it again; t.mu is held.
func (t *Table) atBound(o *owner, bound Bound) {
	full, name := &t.nodeFull, "the node"
	if o != nil {
		full, name = &o.full, o.name
	}
	if *full {
		return
	}
	*full = true
	t.cfg.Log.Warn("MCP sessions at their bound: a new one takes the place of the oldest idle one, or is refused if all are busy",
		"owner", name, "bound", string(bound), "max_per_owner", t.cfg.MaxPerOwner, "max_total", t.cfg.MaxTotal)
}

// release gives back tk's place if no session took it.
func (t *Table) release(tk *ticket) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tk.taken {
		return
	}
	tk.taken = true
	tk.owner.held--
	t.total--
	t.belowBounds(tk.owner)
	t.dropIfEmpty(tk.owner)
}

// registered holds session k, which mcp-go registered, in the
// place its request reserved. One registered with no place (not seen
// opening) is held all the same: a bound is exceeded by it rather than
// a session kept unseen.
func (t *Table) registered(ctx context.Context, k sessionKey, end func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sessions[k] != nil {
		return
	}
	tk, _ := ctx.Value(ticketKey{}).(*ticket)
	if tk == nil || tk.taken {
		tk = &ticket{owner: t.owner(k.owner)}
		tk.owner.held++
		t.total++
	}
	tk.taken = true
	t.seq++
	t.sessions[k] = &session{owner: tk.owner, end: end, used: t.seq}
}

// unregistered forgets session k, which mcp-go dropped: its DELETE, its
// idle TTL, its stream's end, or the endpoint's shutdown.
func (t *Table) unregistered(k sessionKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.sessions[k]; s != nil {
		t.forget(k, s)
		t.belowBounds(s.owner)
	}
}

// forget drops session k; t.mu is held.
func (t *Table) forget(k sessionKey, s *session) {
	delete(t.sessions, k)
	s.owner.held--
	t.total--
	t.dropIfEmpty(s.owner)
}

// belowBounds notes that o and the node may be below their bounds
// again, to log when they next reach them; t.mu is held.
func (t *Table) belowBounds(o *owner) {
	if o.held < t.cfg.MaxPerOwner {
		o.full = false
	}
	if t.total < t.cfg.MaxTotal {
		t.nodeFull = false
	}
}

// owner is what name holds, made if it holds nothing yet; t.mu is held.
func (t *Table) owner(name string) *owner {
	o := t.owners[name]
	if o == nil {
		o = &owner{name: name}
		t.owners[name] = o
	}
	return o
}

// dropIfEmpty forgets o if it holds nothing; t.mu is held.
func (t *Table) dropIfEmpty(o *owner) {
	if o.held == 0 {
		delete(t.owners, o.name)
	}
}

// terminate ends session id in h, an mcp-go endpoint, as its client's
// DELETE would: mcp-go has no other way to drop one session with all it
// keeps of it. Its client, if it comes back, gets 404 (Guard), and
// initializes again.
func terminate(h http.Handler, id string) {
	r, err := http.NewRequestWithContext(context.Background(), http.MethodDelete, "/", http.NoBody)
	if err != nil {
		return
	}
	r.Header.Set(server.HeaderKeySessionID, id)
	h.ServeHTTP(discard{header: http.Header{}}, r)
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{ header http.Header }

func (d discard) Header() http.Header         { return d.header }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}
