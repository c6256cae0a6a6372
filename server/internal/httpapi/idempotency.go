package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
)

// Idempotency keys: a client whose POST timed out cannot know whether its
// command ran, so it may send it again with the same Idempotency-Key, and
// get the first request's answer instead of a second run. See
// RATIONALE.md, "Retries without double execution".
const (
	// ReplayedHeader marks an answer that repeats the first request's.
	ReplayedHeader = "Idempotent-Replayed"
	// maxIdempotencyKey bounds a key's length, as Stripe's does.
	maxIdempotencyKey = 255
)

// idempotency serves the requests that start a task, so that a repeat
// under the same Idempotency-Key gets the first one's answer, and
// answers those whose task did not start.
type idempotency struct {
	log     *slog.Logger
	store   *store.Store
	tasks   *tasks.FrontDoor
	inScope *inscope.Checker
	locks   *keyLocks // idempotency keys being served
}

// keyedHandler serves a request that starts a task. key, if not nil, is
// the request's idempotency key, not yet recorded: the handler gives it to
// the task it starts (tasks.CommandTask's Key, PlanTask's, FleetTask's),
// which records it.
type keyedHandler func(w http.ResponseWriter, r *http.Request, key *store.IdempotencyKey)

// idempotent serves h so that a request with an Idempotency-Key its
// sender has used before runs nothing again: it gets the first request's
// answer, marked Idempotent-Replayed: true, or 422 if it is another
// request (another method, path or body) under the same key. A repeat
// that comes while the first request is still being served waits for it:
// a command's repeat gets the command's outcome when it ends. A first
// request that started nothing (refused, say) recorded no key, so its
// repeat is served as new.
func (i *idempotency) idempotent(h keyedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if len(r.Header.Values(api.IdempotencyKeyHeader)) == 0 {
			h(w, r, nil)
			return
		}
		k, err := i.keyOf(w, r)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		unlock, err := i.locks.lock(r.Context(), k)
		switch {
		case errors.Is(err, errAnotherRequest):
			writeError(w, http.StatusUnprocessableEntity, anotherRequestError(k.Key))
			return
		case err != nil:
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("waiting for the first request with Idempotency-Key %q: %v", k.Key, err))
			return
		}
		defer unlock()
		if !i.repeatAnswered(w, r, k) {
			h(w, r, &k)
		}
	}
}

// repeatAnswered answers r, whose key is k, if k is recorded: with the
// first request's answer, or 422 if r is another request. It reports
// whether it answered; if not, r is the first with its key that this
// node has seen.
func (i *idempotency) repeatAnswered(w http.ResponseWriter, r *http.Request, k store.IdempotencyKey) bool {
	first, err := i.store.IdempotencyKeys().Get(r.Context(), k.Identity, k.Key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case first.Fingerprint != k.Fingerprint:
		writeError(w, http.StatusUnprocessableEntity, anotherRequestError(k.Key))
	default:
		i.replay(r.Context(), w, identity.CallerFrom(r), first)
	}
	return true
}

// writeStartError answers a request, with key if not nil, whose task did
// not start (err). A request that lost the race for its key to another
// (on another node of a cluster, which recorded it first: ErrKeyTaken)
// is a repeat of that one, and gets its answer.
func (i *idempotency) writeStartError(w http.ResponseWriter, r *http.Request, key *store.IdempotencyKey, err error) {
	if key != nil && errors.Is(err, store.ErrKeyTaken) && i.repeatAnswered(w, r, *key) {
		return
	}
	writeSessionError(w, err)
}

// writeTaskError answers a request the front door did not carry out,
// with key if not nil: an order it refused as writeRequestError does, a
// task that did not start or run (*tasks.RunError) as writeStartError does.
func (i *idempotency) writeTaskError(w http.ResponseWriter, r *http.Request, key *store.IdempotencyKey, err error) {
	var failed *tasks.RunError
	if errors.As(err, &failed) {
		i.writeStartError(w, r, key, failed.Err)
		return
	}
	writeRequestError(w, err)
}

// keyOf is r's idempotency key, with its fingerprint. It reads r's body,
// and puts it back for the handler.
func (i *idempotency) keyOf(w http.ResponseWriter, r *http.Request) (store.IdempotencyKey, error) {
	key, err := parseIdempotencyKey(r.Header.Values(api.IdempotencyKeyHeader))
	if err != nil {
		return store.IdempotencyKey{}, err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		return store.IdempotencyKey{}, fmt.Errorf("request body: %w", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return store.IdempotencyKey{Identity: i.identity(r), Key: key, Fingerprint: fingerprint(r, body)}, nil
}

// withAnswer is key, if not nil, carrying answer, the answer a repeat
// gets: for a request answered as soon as its task starts. The API's
// answers always encode.
func withAnswer(key *store.IdempotencyKey, answer any) *store.IdempotencyKey {
	if key == nil {
		return nil
	}
	k := *key
	k.Response, _ = json.Marshal(answer)
	return &k
}

// identity is who sent r, whose idempotency keys are theirs alone: the
// name of its operator identity, whichever of its tokens it used.
func (i *idempotency) identity(r *http.Request) string {
	return identity.CallerFrom(r).Name
}

// parseIdempotencyKey reads the header's one value: 1 to 255 visible
// ASCII characters, without '"' or '\', such as a UUID. The IETF draft's
// form, a quoted string, is taken too.
func parseIdempotencyKey(values []string) (string, error) {
	if len(values) > 1 {
		return "", fmt.Errorf("header %q: given %d times; give it once", api.IdempotencyKeyHeader, len(values))
	}
	key := values[0]
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		key = key[1 : len(key)-1]
	}
	if len(key) == 0 || len(key) > maxIdempotencyKey {
		return "", fmt.Errorf("header %q: %d characters: want 1 to %d", api.IdempotencyKeyHeader, len(key), maxIdempotencyKey)
	}
	if i := strings.IndexFunc(key, func(c rune) bool { return c <= ' ' || c > '~' || c == '"' || c == '\\' }); i >= 0 {
		return "", fmt.Errorf("header %q: character %d is %q: want visible ASCII, without '\"' or '\\'", api.IdempotencyKeyHeader, i+1, key[i])
	}
	return key, nil
}

// fingerprint identifies a request: its method, path and body, byte for
// byte.
func fingerprint(r *http.Request, body []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n", r.Method, r.URL.Path)
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

func anotherRequestError(key string) string {
	return fmt.Sprintf("Idempotency-Key %q was used for another request: a repeat must have the same method, path and body; "+
		"use a new key for a new request", key)
}

// replay answers a repeat from c with the answer of the first request,
// first: the one recorded with its key, or else (a command) its session's
// result, as c may see it.
func (i *idempotency) replay(ctx context.Context, w http.ResponseWriter, c *identity.Caller, first store.IdempotencyKey) {
	answer := first.Response
	if answer == nil {
		var code int
		var err error
		if answer, code, err = i.commandAnswer(ctx, c, first); err != nil {
			writeError(w, code, err.Error())
			return
		}
	}
	w.Header().Set(ReplayedHeader, "true")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(answer)
}

// commandAnswer is the answer to the single command whose key is first,
// once it has ended, as c may see it: its session's result, or, for a
// session a server restart ended, the response its command's record
// makes. The key is c's identity's, but an identity revoked and added
// again under its name may have other tool patterns.
func (i *idempotency) commandAnswer(ctx context.Context, c *identity.Caller, first store.IdempotencyKey) ([]byte, int, error) {
	// The first request under the key may run on another node of a
	// cluster, or have been adopted by one, beyond this node's keyLocks:
	// the repeat waits for the task there, as it would wait here for the
	// first request.
	row, err := i.tasks.Ended(ctx, first.SessionID, func(row store.Session) {
		i.log.Info("a repeated request waits for the task the first request under its key started",
			"session_id", row.ID, "owner", row.Owner)
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, http.StatusConflict, fmt.Errorf("Idempotency-Key %q: the task it started, %q, has been removed; use a new key", first.Key, first.SessionID)
	case err != nil:
		return nil, http.StatusServiceUnavailable, fmt.Errorf("Idempotency-Key %q: waiting for the task it started, %q: %w", first.Key, first.SessionID, err)
	}
	answer, err := i.recordedAnswer(ctx, row)
	if err != nil {
		return nil, http.StatusServiceUnavailable, err
	}
	sight, err := i.inScope.Sight(ctx, c, row)
	if err != nil {
		return nil, http.StatusServiceUnavailable, err
	}
	return sight.Result(row.DeviceID, answer), 0, nil
}

// recordedAnswer is the answer to row, the session of a single command
// that has ended: its result, or the response its command's record makes.
func (i *idempotency) recordedAnswer(ctx context.Context, row store.Session) (json.RawMessage, error) {
	if row.Result != nil {
		return row.Result, nil
	}
	cmds, err := i.tasks.Commands(ctx, row.ID)
	if err != nil {
		return nil, err
	}
	r := dispatch.Result{Recorded: true}
	if len(cmds) > 0 {
		r.ResponseID, r.Results = cmds[0].ResponseID, cmds[0].Results
	}
	return json.Marshal(tasks.CommandOutcome(row.ID, row.DeviceID, r).Result)
}

// errAnotherRequest: a request holds the key with another fingerprint.
var errAnotherRequest = errors.New("another request holds the key")

// keyLocks lets one request at a time be served under each idempotency
// key, so that in this process a repeat never races the first request: it
// waits, then finds the key recorded (or not, if the first started
// nothing). The store's uniqueness of (identity, key) stays the backstop.
type keyLocks struct {
	log *slog.Logger

	mu   sync.Mutex
	held map[string]*heldKey
}

type heldKey struct {
	fingerprint string
	released    chan struct{}
}

func newKeyLocks(log *slog.Logger) *keyLocks { return &keyLocks{log: log, held: map[string]*heldKey{}} }

// lock takes k's key, waiting while a request with the same fingerprint
// holds it, until ctx ends; one with another fingerprint is
// errAnotherRequest at once.
func (l *keyLocks) lock(ctx context.Context, k store.IdempotencyKey) (unlock func(), err error) {
	id := k.Identity + "\x00" + k.Key
	for {
		l.mu.Lock()
		h := l.held[id]
		if h == nil {
			h = &heldKey{fingerprint: k.Fingerprint, released: make(chan struct{})}
			l.held[id] = h
			l.mu.Unlock()
			return func() {
				l.mu.Lock()
				delete(l.held, id)
				l.mu.Unlock()
				close(h.released)
			}, nil
		}
		l.mu.Unlock()
		if h.fingerprint != k.Fingerprint {
			return nil, errAnotherRequest
		}
		l.log.Info("a repeated request waits for the first with its Idempotency-Key", "identity", k.Identity, "key", k.Key)
		select {
		case <-h.released:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}
