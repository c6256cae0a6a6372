package api

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
)

// Client calls the operator API. Every call has a bounded wait: a server
// that accepts the connection and never replies fails the call with
// ErrUnreachable; it does not hang the caller.
type Client struct {
	// BaseURL is the server, e.g. http://127.0.0.1:8700.
	BaseURL string
	// Token is an operator token: the identity the client acts for.
	Token string
	// HTTP performs requests. Default: http.DefaultTransport's settings,
	// with a dial that gives up after DialTimeout.
	HTTP *http.Client
	// ReplyTimeout is how long a call waits for the server's reply on top
	// of any wait the call asks of the server (a command's or a deploy's
	// timeout), and how long a task's event stream takes to open.
	// Default DefaultReplyTimeout.
	ReplyTimeout time.Duration
	// PreparationWait is how much longer than a command's or a deploy's
	// timeout a call waits for the server's reply, since the server holds
	// the timeout while the device prepares the tool, up to its
	// --preparation-bound. Default DefaultPreparationWait, the server's
	// default bound.
	PreparationWait time.Duration
	// ServerSilence is how long a call that asks the server to wait (a
	// command, a deploy) lets the server answer nothing, neither the call
	// nor GET /api/health, which the client asks every ServerSilence/3
	// meanwhile, before it gives up with ErrServerSilent: a server that
	// hangs or is gone would otherwise hold it for the command's timeout
	// and the whole preparation bound (10m45s by default), and a healthy
	// one answers its health at once, however long the command takes.
	// Default DefaultServerSilence.
	ServerSilence time.Duration
	// EventsIdleTimeout is how long an event stream may bring nothing,
	// not even the server's keepalive, before Events takes it as broken
	// and connects again. Default DefaultEventsIdleTimeout.
	EventsIdleTimeout time.Duration
	// EventsRetryWait is how long Events waits before it connects again
	// after a stream broke. Default 1 s.
	EventsRetryWait time.Duration
}

// Bounds on a Client's waits.
const (
	// DialTimeout bounds connecting to the server.
	DialTimeout = 10 * time.Second
	// DefaultReplyTimeout is a healthy server's reply time, generously.
	DefaultReplyTimeout = 15 * time.Second
	// DefaultPreparationWait is the server's default preparation bound.
	DefaultPreparationWait = 10 * time.Minute
	// DefaultServerSilence is three DefaultReplyTimeouts: a server that
	// answered none of the health checks of that long hangs, or is gone.
	DefaultServerSilence = 3 * DefaultReplyTimeout
	// DefaultEventsIdleTimeout is three of the server's 15 s keepalives:
	// a stream idle that long has lost its server.
	DefaultEventsIdleTimeout = 45 * time.Second
)

// defaultHTTP is the client of a Client without HTTP. It is shared so
// that Clients reuse connections, and never changed.
var defaultHTTP = &http.Client{Transport: boundedTransport()}

// HTTPClient is an HTTP client for a Client whose server speaks TLS
// configured by tc (its RootCAs, say): with the bounded dial of the
// default client.
func HTTPClient(tc *tls.Config) *http.Client {
	t := boundedTransport()
	t.TLSClientConfig = tc
	return &http.Client{Transport: t}
}

// boundedTransport is http.DefaultTransport with DialTimeout. There is no
// response header timeout: the reply to a command comes only with its
// result. Each call's context bounds that wait instead.
func boundedTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	return t
}

// StatusError is a request the server answered with a non-2xx status.
// Problems lists, on a 400 from admission, each thing wrong with the
// request (Message lists them too).
type StatusError struct {
	Code     int
	Message  string
	Problems []Problem
}

// Error is the server's message, or, for a refusal, each problem on a
// line of its own.
func (e *StatusError) Error() string {
	if len(e.Problems) == 0 {
		return fmt.Sprintf("server answered %d: %s", e.Code, e.Message)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "server answered %d: refused:", e.Code)
	for _, p := range e.Problems {
		b.WriteString("\n  " + p.String())
	}
	return b.String()
}

// ErrUnreachable wraps failures to reach the server at all.
var ErrUnreachable = errors.New("server unreachable")

// ErrServerSilent wraps, beside ErrUnreachable, the failure of a call the
// server accepted and then stopped answering, its health checks too
// (Client.ServerSilence): what the call started may have run, or may
// still, and its outcome is unknown.
var ErrServerSilent = errors.New("server stopped answering")

// Do sends a request with body in (JSON, or none if nil) and decodes the
// response into out (if not nil). It waits ReplyTimeout for the reply.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	return c.do(ctx, 0, http.Header{}, method, path, in, out)
}

// IdempotencyKeyHeader is the header of a request's idempotency key.
const IdempotencyKeyHeader = "Idempotency-Key"

// NewIdempotencyKey returns a fresh idempotency key: 128 random bits.
func NewIdempotencyKey() string { return rand.Text() }

// startTask is do for a request that starts a task, sent with key as its
// Idempotency-Key, or a fresh one.
func (c *Client) startTask(ctx context.Context, wait time.Duration, key, path string, in, out any) error {
	h := http.Header{IdempotencyKeyHeader: {cmp.Or(key, NewIdempotencyKey())}}
	return c.do(ctx, wait, h, http.MethodPost, path, in, out)
}

// do is Do for a request with header that asks the server to wait up to
// wait before it replies: it waits that long more.
func (c *Client) do(ctx context.Context, wait time.Duration, header http.Header, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode request: %w", method, path, err)
		}
		body = bytes.NewReader(b)
		header.Set("Content-Type", "application/json")
	}
	return c.send(ctx, wait, header, method, path, body, out)
}

// send sends a request with header and body, and decodes the JSON
// response into out (if not nil); it waits wait plus ReplyTimeout for the
// whole reply. A call that asks the server to wait (wait > 0) gives up
// sooner if the server stops answering meanwhile (watchServer).
func (c *Client) send(ctx context.Context, wait time.Duration, header http.Header, method, path string, body io.Reader, out any) error {
	limit := wait + cmp.Or(c.ReplyTimeout, DefaultReplyTimeout)
	callCtx, cancel := context.WithTimeoutCause(ctx, limit, noReply(wait, limit))
	defer cancel()
	if wait > 0 {
		var silent context.CancelCauseFunc
		callCtx, silent = context.WithCancelCause(callCtx)
		defer silent(nil)
		go c.watchServer(callCtx, silent)
	}
	req, err := c.newRequest(callCtx, method, path, body)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrUnreachable, method, path, cmp.Or(expired(ctx, callCtx), err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return statusError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if cause := expired(ctx, callCtx); cause != nil {
			return fmt.Errorf("%w: %s %s: %w", ErrUnreachable, method, path, cause)
		}
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}

// watchServer asks the server's health every ServerSilence/3 until ctx,
// a call's, ends, and ends the call with ErrServerSilent once no check
// was answered for ServerSilence. Any answer counts, a degraded one (503)
// too: the server is there, and will answer the call by its own bounds.
func (c *Client) watchServer(ctx context.Context, silent context.CancelCauseFunc) {
	bound := cmp.Or(c.ServerSilence, DefaultServerSilence)
	every := bound / 3
	answered := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if c.healthAnswers(ctx, every) {
			answered = time.Now()
		} else if time.Since(answered) >= bound {
			silent(fmt.Errorf("%w: it answered neither the call nor GET /api/health for %s", ErrServerSilent, bound))
			return
		}
	}
}

// healthAnswers reports whether the server answers GET /api/health, which
// needs no token, within wait.
func (c *Client) healthAnswers(ctx context.Context, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.BaseURL, "/")+"/api/health", nil)
	if err != nil {
		return false
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return true
}

// newRequest is a request to the API at path, with the operator token.
func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	return req, nil
}

// noReply is the error of a call that waited limit for a reply in vain.
func noReply(wait, limit time.Duration) error {
	if wait == 0 {
		return fmt.Errorf("no reply within %s", limit)
	}
	return fmt.Errorf("no reply within %s (the %s the call asks the server to wait, and %s more)", limit, wait, limit-wait)
}

// expired is why callCtx, derived from ctx, gave up waiting while ctx
// still runs, or nil: what a "context canceled" from the call means.
func expired(ctx, callCtx context.Context) error {
	if ctx.Err() == nil && callCtx.Err() != nil {
		return context.Cause(callCtx)
	}
	return nil
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP == nil {
		return defaultHTTP
	}
	return c.HTTP
}

// statusError reads a non-2xx answer's Error body.
func statusError(resp *http.Response) *StatusError {
	var e Error
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		e.Error = strings.TrimSpace(string(b))
	}
	return &StatusError{Code: resp.StatusCode, Message: e.Error, Problems: e.Problems}
}

// Enroll creates a device and returns its token.
func (c *Client) Enroll(ctx context.Context, req EnrollRequest) (EnrollResponse, error) {
	var out EnrollResponse
	err := c.Do(ctx, http.MethodPost, "/api/devices", req, &out)
	return out, err
}

// RotateToken has the server give a device a new token, over its link,
// and waits for the device to confirm it (up to req.Wait).
func (c *Client) RotateToken(ctx context.Context, id string, req RotateRequest) (TokenRotation, error) {
	var out TokenRotation
	wait, err := ParseRotateWait(req.Wait)
	if err != nil {
		return out, err
	}
	err = c.do(ctx, wait, http.Header{}, http.MethodPost, "/api/devices/"+url.PathEscape(id)+"/token", req, &out)
	return out, err
}

// SignCertificate has the server sign a certificate for an enrolled
// device's key, with its device CA.
func (c *Client) SignCertificate(ctx context.Context, id string, req CertificateRequest) (Certificate, error) {
	var out Certificate
	err := c.Do(ctx, http.MethodPost, "/api/devices/"+url.PathEscape(id)+"/certificate", req, &out)
	return out, err
}

// Devices lists the enrolled devices.
func (c *Client) Devices(ctx context.Context) ([]Device, error) {
	var out []Device
	err := c.Do(ctx, http.MethodGet, "/api/devices", nil, &out)
	return out, err
}

// Command runs actions on a device and waits for their results: the
// request's timeout, PreparationWait and ReplyTimeout more. It is sent with
// req.IdempotencyKey, or a fresh key.
func (c *Client) Command(ctx context.Context, deviceID string, req CommandRequest) (CommandResponse, error) {
	// A timeout that does not parse is the server's to refuse, at once.
	wait, _ := ParseTimeout(req.Timeout)
	var out CommandResponse
	err := c.startTask(ctx, c.toolWait(wait), req.IdempotencyKey, "/api/devices/"+url.PathEscape(deviceID)+"/commands", req, &out)
	return out, err
}

// Dispatch starts a task on a device (UFO's POST /api/dispatch). It is
// sent with req.IdempotencyKey, or a fresh key.
func (c *Client) Dispatch(ctx context.Context, req DispatchRequest) (DispatchResponse, error) {
	var out DispatchResponse
	err := c.startTask(ctx, 0, req.IdempotencyKey, "/api/dispatch", req, &out)
	return out, err
}

// Task returns one task with its commands.
func (c *Client) Task(ctx context.Context, sessionID string) (Task, error) {
	var out Task
	err := c.Do(ctx, http.MethodGet, "/api/tasks/"+url.PathEscape(sessionID), nil, &out)
	return out, err
}

// TaskPage returns one page of tasks, newest first, as q picks them.
func (c *Client) TaskPage(ctx context.Context, q TaskQuery) (TaskPage, error) {
	v := url.Values{}
	for k, s := range map[string]string{"state": string(q.State), "task_name": q.TaskName, "cursor": q.Cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	path := "/api/tasks"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out TaskPage
	err := c.Do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// Tasks lists tasks, newest first: at most limit of them (one page of the
// server's default size if 0), in state unless it is empty. It follows
// the pages as far as limit needs.
func (c *Client) Tasks(ctx context.Context, state TaskState, limit int) ([]TaskSummary, error) {
	q := TaskQuery{State: state, Limit: min(limit, MaxTaskPage)}
	out := []TaskSummary{}
	for {
		page, err := c.TaskPage(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Tasks...)
		if page.Next == "" || limit == 0 || len(out) >= limit {
			return out, nil
		}
		q.Cursor, q.Limit = page.Next, min(limit-len(out), MaxTaskPage)
	}
}

// CancelTask cancels a running task and returns it as it ended.
func (c *Client) CancelTask(ctx context.Context, sessionID string) (Task, error) {
	var out Task
	err := c.Do(ctx, http.MethodPost, "/api/tasks/"+url.PathEscape(sessionID)+"/cancel", nil, &out)
	return out, err
}

// DeployTool pushes a tool module to a device, which verifies, keeps and
// loads it into namespace (empty: the device's default). The response's
// one Result says whether the device installed it.
func (c *Client) DeployTool(ctx context.Context, deviceID string, wasm []byte, namespace string, timeout time.Duration) (CommandResponse, error) {
	return c.deployTool(ctx, deviceID, wasm, namespace, timeout, false)
}

// DeployToolOver is DeployTool for a tool that a rollout owns on the
// device: the device keeps the module in place of the rollout's, and the
// rollout's status shows it as drift.
func (c *Client) DeployToolOver(ctx context.Context, deviceID string, wasm []byte, namespace string, timeout time.Duration) (CommandResponse, error) {
	return c.deployTool(ctx, deviceID, wasm, namespace, timeout, true)
}

func (c *Client) deployTool(ctx context.Context, deviceID string, wasm []byte, namespace string, timeout time.Duration, force bool) (CommandResponse, error) {
	q := url.Values{"timeout": {timeout.String()}}
	if namespace != "" {
		q.Set("namespace", namespace)
	}
	if force {
		q.Set("force", "true")
	}
	var out CommandResponse
	path := "/api/devices/" + url.PathEscape(deviceID) + "/tools?" + q.Encode()
	err := c.send(ctx, c.toolWait(timeout), http.Header{"Content-Type": {"application/wasm"}}, http.MethodPost, path, bytes.NewReader(wasm), &out)
	return out, err
}

// toolWait is how long the server may take, beyond ReplyTimeout, to
// answer a request that runs a tool for timeout: the timeout, and the
// preparation of the tool it may hold it for.
func (c *Client) toolWait(timeout time.Duration) time.Duration {
	return max(timeout, 0) + cmp.Or(c.PreparationWait, DefaultPreparationWait)
}

// Device returns one enrolled device.
func (c *Client) Device(ctx context.Context, id string) (Device, error) {
	var out Device
	err := c.Do(ctx, http.MethodGet, "/api/devices/"+url.PathEscape(id), nil, &out)
	return out, err
}

// DeviceTools returns a device's tools, with their schemas, as it last
// registered them.
func (c *Client) DeviceTools(ctx context.Context, id string) ([]protocol.MCPToolInfo, error) {
	var out []protocol.MCPToolInfo
	err := c.Do(ctx, http.MethodGet, "/api/devices/"+url.PathEscape(id)+"/tools", nil, &out)
	return out, err
}

// Revoke deletes a device: its token stops working and its connection
// closes.
func (c *Client) Revoke(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/api/devices/"+url.PathEscape(id), nil, nil)
}

// Fleet starts a plan on every device whose labels match. It is sent
// with req.IdempotencyKey, or a fresh key.
func (c *Client) Fleet(ctx context.Context, req FleetRequest) (FleetResponse, error) {
	var out FleetResponse
	err := c.startTask(ctx, 0, req.IdempotencyKey, "/api/fleets", req, &out)
	return out, err
}
