package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
)

// Client calls the operator API.
type Client struct {
	// BaseURL is the server, e.g. http://127.0.0.1:8700.
	BaseURL string
	// Token is the operator token.
	Token string
	// HTTP performs requests. Default http.DefaultClient.
	HTTP *http.Client
	// EventsRetryWait is how long Events waits before it connects again
	// after a stream broke. Default 1 s.
	EventsRetryWait time.Duration
}

// StatusError is a request the server answered with a non-2xx status.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string { return fmt.Sprintf("server answered %d: %s", e.Code, e.Message) }

// ErrUnreachable wraps failures to reach the server at all.
var ErrUnreachable = errors.New("server unreachable")

// Do sends a request with body in (JSON, or none if nil) and decodes the
// response into out (if not nil).
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	contentType := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode request: %w", method, path, err)
		}
		body, contentType = bytes.NewReader(b), "application/json"
	}
	return c.send(ctx, method, path, body, contentType, out)
}

// send sends a request with body of contentType, and decodes the JSON
// response into out (if not nil).
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrUnreachable, method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return statusError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP == nil {
		return http.DefaultClient
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
	return &StatusError{Code: resp.StatusCode, Message: e.Error}
}

// Enroll creates a device and returns its token.
func (c *Client) Enroll(ctx context.Context, req EnrollRequest) (EnrollResponse, error) {
	var out EnrollResponse
	err := c.Do(ctx, http.MethodPost, "/api/devices", req, &out)
	return out, err
}

// Devices lists the enrolled devices.
func (c *Client) Devices(ctx context.Context) ([]Device, error) {
	var out []Device
	err := c.Do(ctx, http.MethodGet, "/api/devices", nil, &out)
	return out, err
}

// Command runs actions on a device and waits for their results.
func (c *Client) Command(ctx context.Context, deviceID string, req CommandRequest) (CommandResponse, error) {
	var out CommandResponse
	err := c.Do(ctx, http.MethodPost, "/api/devices/"+url.PathEscape(deviceID)+"/commands", req, &out)
	return out, err
}

// Dispatch starts a task on a device (UFO's POST /api/dispatch).
func (c *Client) Dispatch(ctx context.Context, req DispatchRequest) (DispatchResponse, error) {
	var out DispatchResponse
	err := c.Do(ctx, http.MethodPost, "/api/dispatch", req, &out)
	return out, err
}

// Task returns one task with its commands.
func (c *Client) Task(ctx context.Context, sessionID string) (Task, error) {
	var out Task
	err := c.Do(ctx, http.MethodGet, "/api/tasks/"+url.PathEscape(sessionID), nil, &out)
	return out, err
}

// Tasks lists tasks, newest first: at most limit of them (the server's
// default if 0), in state unless it is empty.
func (c *Client) Tasks(ctx context.Context, state TaskState, limit int) ([]Task, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", string(state))
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/api/tasks"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out []Task
	err := c.Do(ctx, http.MethodGet, path, nil, &out)
	return out, err
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
	q := url.Values{"timeout": {timeout.String()}}
	if namespace != "" {
		q.Set("namespace", namespace)
	}
	var out CommandResponse
	path := "/api/devices/" + url.PathEscape(deviceID) + "/tools?" + q.Encode()
	err := c.send(ctx, http.MethodPost, path, bytes.NewReader(wasm), "application/wasm", &out)
	return out, err
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

// Fleet starts a plan on every device whose labels match.
func (c *Client) Fleet(ctx context.Context, req FleetRequest) (FleetResponse, error) {
	var out FleetResponse
	err := c.Do(ctx, http.MethodPost, "/api/fleets", req, &out)
	return out, err
}
