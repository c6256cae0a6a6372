package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testpki"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/httpapi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The access matrix: every endpoint of openapi.json and every message type
// a client may send, against each role and a scoped identity. Allowed, a
// request works; below the role it is 403; outside the scope, 404. The
// endpoints come from the document and the message types from protocol,
// so that a new one without a probe here (and a rule in the policy)
// fails.

// addIdentity adds an identity as the bootstrap admin and returns its
// token.
func (ts *testServer) addIdentity(name, role string, scope *api.Scope) string {
	ts.t.Helper()
	resp, err := ts.api.AddIdentity(context.Background(), api.IdentityRequest{Name: name, Role: role, Scope: scope})
	require.NoError(ts.t, err)
	return resp.Token
}

// as is the API client of token.
func (ts *testServer) as(token string) *api.Client {
	c := *ts.api
	c.Token = token
	return &c
}

// call sends a request with token (none if empty) and returns the status
// and body.
func (ts *testServer) call(token string, rq probeRequest) (int, string) {
	ts.t.Helper()
	var body io.Reader
	if rq.body != nil {
		body = bytes.NewReader(rq.body)
	}
	req, err := http.NewRequest(rq.method, ts.http.URL+rq.path, body)
	require.NoError(ts.t, err)
	for k, v := range rq.header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(ts.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// drain reads and drops what the client is sent until its link ends: a
// device that never answers.
func (rc *rawClient) drain() {
	go func() {
		for {
			if _, err := rc.read(); err != nil && !strings.Contains(err.Error(), "deadline") {
				return
			}
		}
	}()
}

// probeRequest is one HTTP request of the matrix.
type probeRequest struct {
	method, path string
	body         []byte
	header       http.Header
}

func jsonRequest(method, path string, v any) probeRequest {
	b, _ := json.Marshal(v)
	return probeRequest{method: method, path: path, body: b, header: http.Header{"Content-Type": {"application/json"}}}
}

// probeScope is how a scope holds an endpoint, as the issue says it
// must.
type probeScope int

const (
	// open to all: public, the caller's own identity, and lists, which
	// a scope filters (checked by tests of their own).
	open probeScope = iota
	// object: the request is about a device or a task, which outside
	// the scope is 404.
	object
	// enrollment: the labels of a device to enroll, which outside the
	// scope are 403: there is no object yet to hide.
	enrollment
	// pending: a task name outside the scope reads as one not known,
	// "pending", as UFO answers.
	pending
	// fleetWide: the endpoint covers every device: 403 to a scoped
	// identity.
	fleetWide
)

// probe is the matrix's row for one endpoint: the least role that may
// use it (0: public), how a scope holds it, and a request that works,
// made afresh for each call on the objects of target (in or out of the
// scoped identity's scope), with the status it gets.
type probe struct {
	least   access.Role
	scope   probeScope
	works   int
	request func(m *matrix, target string) probeRequest
}

// matrix is a server with devices and tasks in scope (site=lobby) and out
// of it (site=depot), and an identity for each role and a scoped one.
type matrix struct {
	ts     *testServer
	tokens map[string]string // by identity name
	csr    string            // a device's certificate request, PEM
	seq    int
}

const (
	in  = "in"
	out = "out"
)

// device names the device of target: kind is "" (answers every command)
// or "quiet" (answers none).
func (m *matrix) device(target, kind string) string {
	return strings.TrimSuffix(target+"-"+kind, "-")
}

func (m *matrix) fresh(prefix string) string {
	m.seq++
	return fmt.Sprintf("%s-%d", prefix, m.seq)
}

func labelsOf(target string) map[string]string {
	if target == in {
		return map[string]string{"site": "lobby"}
	}
	return map[string]string{"site": "depot"}
}

// finishedTask is a task that ended on target's device.
func (m *matrix) finishedTask(target string) string {
	m.ts.t.Helper()
	resp, err := m.ts.api.Command(context.Background(), m.device(target, ""), api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
	require.NoError(m.ts.t, err)
	return resp.SessionID
}

// runningTask is a plan running on target's quiet device.
func (m *matrix) runningTask(target string) string {
	m.ts.t.Helper()
	d, err := m.ts.api.Dispatch(context.Background(), api.DispatchRequest{ClientID: m.device(target, "quiet"), Request: echoPlan})
	require.NoError(m.ts.t, err)
	return d.SessionID
}

// module is a signed tool module, for the module and rollout probes.
func (m *matrix) module() []byte {
	module, err := os.ReadFile("../testdata/tools/signed/signed_echo.wasm")
	require.NoError(m.ts.t, err)
	return module
}

// rolloutSpec is a rollout named name of m.module, for devices no probe
// uses.
func (m *matrix) rolloutSpec(name string) []byte {
	mod, err := m.ts.api.PutModule(context.Background(), m.module())
	require.NoError(m.ts.t, err)
	spec, err := json.Marshal(map[string]any{"name": name, "selector": "site=nowhere", "tools": []string{mod.SHA256}})
	require.NoError(m.ts.t, err)
	return spec
}

// rollout is a fresh rollout, applied.
func (m *matrix) rollout() string {
	name := m.fresh("r")
	_, err := m.ts.api.ApplyRollout(context.Background(), m.rolloutSpec(name))
	require.NoError(m.ts.t, err)
	return name
}

// newMatrix starts the matrix's server, with a device CA to sign
// certificates with (served over plain HTTP: signing does not need TLS).
func newMatrix(t *testing.T) *matrix {
	ts := newTestServer(t, func(c *Config) { c.TLS = newPKI(t, true).files })
	csr, _ := testpki.Request(t, "a device")
	m := &matrix{ts: ts, tokens: map[string]string{}, csr: string(csr)}
	inventory := []protocol.MCPToolInfo{tool("stock", "echo", protocol.ToolAction), tool("", protocol.InstallToolName, protocol.ToolAction)}
	for _, target := range []string{in, out} {
		for _, kind := range []string{"", "quiet"} {
			id := m.device(target, kind)
			resp, err := ts.api.Enroll(context.Background(), api.EnrollRequest{ID: id, Labels: labelsOf(target)})
			require.NoError(t, err)
			dev := ts.mustDial(resp.Token)
			dev.register(id, inventory...)
			if kind == "" {
				dev.serveOK()
			} else {
				dev.drain()
			}
		}
	}
	for _, r := range access.Roles() {
		m.tokens[r.String()] = ts.addIdentity("a-"+r.String(), r.String(), nil)
	}
	m.tokens["scoped"] = ts.addIdentity("scoped", api.RoleAdmin, &api.Scope{Devices: "site=lobby"})
	return m
}

// probes are the matrix's rows, by route: the policy, written
// down here again on purpose, as the test's own statement of it.
var probes = map[string]probe{
	"GET /api/health":       {works: 200, request: get("/api/health")},
	"GET /api/openapi.json": {works: 200, request: get("/api/openapi.json")},
	"POST /api/login": {works: 200, request: func(m *matrix, _ string) probeRequest {
		rq := jsonRequest("POST", "/api/login", api.LoginRequest{Token: m.tokens[api.RoleViewer]})
		rq.header.Set("Sec-Fetch-Site", "same-origin")
		return rq
	}},
	"POST /api/logout": {works: 204, request: func(*matrix, string) probeRequest {
		return probeRequest{method: "POST", path: "/api/logout", header: http.Header{"Sec-Fetch-Site": {"same-origin"}}}
	}},
	"GET /api/whoami":  {least: access.Viewer, works: 200, request: get("/api/whoami")},
	"GET /api/version": {least: access.Viewer, works: 200, request: get("/api/version")},
	"GET /api/clients": {least: access.Viewer, works: 200, request: get("/api/clients")},
	"GET /api/devices": {least: access.Viewer, works: 200, request: get("/api/devices")},
	"GET /api/tasks":   {least: access.Viewer, works: 200, request: get("/api/tasks")},
	"GET /api/audit":   {least: access.Viewer, works: 200, request: get("/api/audit")},
	"GET /metrics":     {least: access.Viewer, scope: fleetWide, works: 200, request: get("/metrics")},
	"GET /api/cluster": {least: access.Operator, scope: fleetWide, works: 200, request: get("/api/cluster")},
	"GET /api/devices/{id}": {least: access.Viewer, scope: object, works: 200, request: func(m *matrix, target string) probeRequest {
		return probeRequest{method: "GET", path: "/api/devices/" + m.device(target, "")}
	}},
	"GET /api/devices/{id}/tools": {least: access.Viewer, scope: object, works: 200, request: func(m *matrix, target string) probeRequest {
		return probeRequest{method: "GET", path: "/api/devices/" + m.device(target, "") + "/tools"}
	}},
	"GET /api/tasks/{id}": {least: access.Viewer, scope: object, works: 200, request: func(m *matrix, target string) probeRequest {
		return probeRequest{method: "GET", path: "/api/tasks/" + m.finishedTask(target)}
	}},
	"GET /api/tasks/{id}/events": {least: access.Viewer, scope: object, works: 200, request: func(m *matrix, target string) probeRequest {
		return probeRequest{method: "GET", path: "/api/tasks/" + m.finishedTask(target) + "/events"}
	}},
	"GET /api/task_result/{task_name}": {least: access.Viewer, scope: pending, works: 200, request: func(m *matrix, target string) probeRequest {
		name := m.fresh("named-" + target)
		d, err := m.ts.api.Dispatch(context.Background(), api.DispatchRequest{ClientID: m.device(target, ""), Request: echoPlan, TaskName: name})
		require.NoError(m.ts.t, err)
		m.ts.waitTask(d.SessionID)
		return probeRequest{method: "GET", path: "/api/task_result/" + name}
	}},
	"POST /api/devices/{id}/commands": {least: access.Operator, scope: object, works: 200, request: func(m *matrix, target string) probeRequest {
		return jsonRequest("POST", "/api/devices/"+m.device(target, "")+"/commands", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
	}},
	"POST /api/dispatch": {least: access.Operator, scope: object, works: 200, request: func(m *matrix, target string) probeRequest {
		return jsonRequest("POST", "/api/dispatch", api.DispatchRequest{ClientID: m.device(target, ""), Request: echoPlan})
	}},
	"POST /api/fleets": {least: access.Operator, scope: object, works: 200, request: func(m *matrix, target string) probeRequest {
		return jsonRequest("POST", "/api/fleets", map[string]any{"labels": labelsOf(target), "plan": echoPlan})
	}},
	"POST /api/admission": {least: access.Operator, scope: object, works: 200, request: func(m *matrix, target string) probeRequest {
		return jsonRequest("POST", "/api/admission", api.AdmissionRequest{Device: m.device(target, ""), Plan: json.RawMessage(`"` + echoPlan + `"`)})
	}},
	"POST /api/tasks/{id}/cancel": {least: access.Operator, scope: object, works: 200, request: func(m *matrix, target string) probeRequest {
		return probeRequest{method: "POST", path: "/api/tasks/" + m.runningTask(target) + "/cancel"}
	}},
	"DELETE /api/tasks/{id}": {least: access.Operator, scope: object, works: 204, request: func(m *matrix, target string) probeRequest {
		return probeRequest{method: "DELETE", path: "/api/tasks/" + m.finishedTask(target)}
	}},
	"POST /api/devices/{id}/tools": {least: access.Deployer, scope: object, works: 200, request: func(m *matrix, target string) probeRequest {
		return probeRequest{method: "POST", path: "/api/devices/" + m.device(target, "") + "/tools?timeout=10s", body: []byte("\x00asm\x01\x00\x00\x00"),
			header: http.Header{"Content-Type": {"application/wasm"}}}
	}},
	"PATCH /api/devices/{id}/labels": {least: access.Admin, scope: object, works: 200, request: func(m *matrix, target string) probeRequest {
		return jsonRequest("PATCH", "/api/devices/"+m.device(target, "")+"/labels", api.LabelRequest{Set: map[string]string{"note": m.fresh("n")}})
	}},
	"PUT /api/modules/{sha256}": {least: access.Deployer, scope: fleetWide, works: 200, request: func(m *matrix, _ string) probeRequest {
		module := m.module()
		sum := sha256.Sum256(module)
		return probeRequest{method: "PUT", path: "/api/modules/" + hex.EncodeToString(sum[:]), body: module, header: http.Header{"Content-Type": {"application/wasm"}}}
	}},
	"PUT /api/releases/{sha256}": {least: access.Deployer, scope: fleetWide, works: 201, request: func(m *matrix, _ string) probeRequest {
		return releaseRequest(m.ts.t, m.fresh("1.0.0-p"), []byte(m.fresh("an agent build ")))
	}},
	"GET /api/releases": {least: access.Viewer, works: 200, request: get("/api/releases")},
	"GET /api/rollouts": {least: access.Viewer, works: 200, request: get("/api/rollouts")},
	"GET /api/rollouts/{name}": {least: access.Viewer, works: 200, request: func(m *matrix, _ string) probeRequest {
		return probeRequest{method: "GET", path: "/api/rollouts/" + m.rollout()}
	}},
	"GET /api/rollouts/{name}/history": {least: access.Viewer, works: 200, request: func(m *matrix, _ string) probeRequest {
		return probeRequest{method: "GET", path: "/api/rollouts/" + m.rollout() + "/history"}
	}},
	"POST /api/rollouts": {least: access.Deployer, scope: fleetWide, works: 201, request: func(m *matrix, _ string) probeRequest {
		return jsonRequest("POST", "/api/rollouts", json.RawMessage(m.rolloutSpec(m.fresh("r"))))
	}},
	"POST /api/rollouts/{name}/pause": {least: access.Deployer, scope: fleetWide, works: 200, request: func(m *matrix, _ string) probeRequest {
		return probeRequest{method: "POST", path: "/api/rollouts/" + m.rollout() + "/pause"}
	}},
	"POST /api/rollouts/{name}/resume": {least: access.Deployer, scope: fleetWide, works: 200, request: func(m *matrix, _ string) probeRequest {
		name := m.rollout()
		_, err := m.ts.api.ControlRollout(context.Background(), name, "pause")
		require.NoError(m.ts.t, err)
		return probeRequest{method: "POST", path: "/api/rollouts/" + name + "/resume"}
	}},
	"POST /api/rollouts/{name}/rollback": {least: access.Deployer, scope: fleetWide, works: 200, request: func(m *matrix, _ string) probeRequest {
		return probeRequest{method: "POST", path: "/api/rollouts/" + m.rollout() + "/rollback"}
	}},
	"POST /api/devices": {least: access.Admin, scope: enrollment, works: 201, request: func(m *matrix, target string) probeRequest {
		return jsonRequest("POST", "/api/devices", api.EnrollRequest{ID: m.fresh("new-" + target), Labels: labelsOf(target)})
	}},
	"DELETE /api/devices/{id}": {least: access.Admin, scope: object, works: 204, request: func(m *matrix, target string) probeRequest {
		id := m.fresh("doomed-" + target)
		_, err := m.ts.api.Enroll(context.Background(), api.EnrollRequest{ID: id, Labels: labelsOf(target)})
		require.NoError(m.ts.t, err)
		return probeRequest{method: "DELETE", path: "/api/devices/" + id}
	}},
	"POST /api/devices/{id}/token": {least: access.Admin, scope: object, works: 202, request: func(m *matrix, target string) probeRequest {
		id := m.fresh("rotated-" + target) // never linked: the rotation waits for it
		_, err := m.ts.api.Enroll(context.Background(), api.EnrollRequest{ID: id, Labels: labelsOf(target)})
		require.NoError(m.ts.t, err)
		return jsonRequest("POST", "/api/devices/"+id+"/token", api.RotateRequest{})
	}},
	"POST /api/devices/{id}/certificate": {least: access.Admin, scope: object, works: 201, request: func(m *matrix, target string) probeRequest {
		return jsonRequest("POST", "/api/devices/"+m.device(target, "")+"/certificate", api.CertificateRequest{CSR: m.csr})
	}},
	"POST /mcp": {least: access.Viewer, works: 200, request: func(*matrix, string) probeRequest {
		rq := jsonRequest("POST", "/mcp", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
			"params": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "probe", "version": "1"}}})
		rq.header.Set("Accept", "application/json, text/event-stream")
		return rq
	}},
	// The stream is asked for on revision 2026-07-28, which has none, so
	// that the MCP server, past the policy, answers at once.
	"GET /mcp": {least: access.Viewer, works: 405, request: func(*matrix, string) probeRequest {
		return probeRequest{method: "GET", path: "/mcp", header: http.Header{"Accept": {"text/event-stream"}, "Mcp-Protocol-Version": {"2026-07-28"}}}
	}},
	// A DELETE that names no session is 400, as the transport says, once
	// past the policy.
	"DELETE /mcp": {least: access.Viewer, works: 400, request: func(*matrix, string) probeRequest {
		return probeRequest{method: "DELETE", path: "/mcp", header: http.Header{"Mcp-Protocol-Version": {"2025-11-25"}}}
	}},
	"GET /api/identities": {least: access.Admin, scope: fleetWide, works: 200, request: get("/api/identities")},
	"POST /api/identities": {least: access.Admin, scope: fleetWide, works: 201, request: func(m *matrix, _ string) probeRequest {
		return jsonRequest("POST", "/api/identities", api.IdentityRequest{Name: m.fresh("someone"), Role: api.RoleViewer})
	}},
	"DELETE /api/identities/{name}": {least: access.Admin, scope: fleetWide, works: 204, request: func(m *matrix, _ string) probeRequest {
		name := m.fresh("leaving")
		m.ts.addIdentity(name, api.RoleViewer, nil)
		return probeRequest{method: "DELETE", path: "/api/identities/" + name}
	}},
	"POST /api/identities/{name}/tokens": {least: access.Admin, scope: fleetWide, works: 201, request: func(m *matrix, _ string) probeRequest {
		name := m.fresh("rotating")
		m.ts.addIdentity(name, api.RoleViewer, nil)
		return jsonRequest("POST", "/api/identities/"+name+"/tokens", api.IdentityRotateRequest{})
	}},
	"DELETE /api/identities/{name}/tokens/{token_id}": {least: access.Admin, scope: fleetWide, works: 204, request: func(m *matrix, _ string) probeRequest {
		name := m.fresh("two-tokens")
		m.ts.addIdentity(name, api.RoleViewer, nil)
		resp, err := m.ts.api.RotateIdentity(context.Background(), name, time.Hour)
		require.NoError(m.ts.t, err)
		return probeRequest{method: "DELETE", path: "/api/identities/" + name + "/tokens/" + resp.TokenID}
	}},
}

func get(path string) func(*matrix, string) probeRequest {
	return func(*matrix, string) probeRequest { return probeRequest{method: "GET", path: path} }
}

// documentedRoutes lists openapi.json's operations as "METHOD path".
func documentedRoutes(t *testing.T) []string {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(httpapi.OpenAPIDocument(), &doc))
	var out []string
	for path, item := range doc.Paths {
		for method := range item {
			if method != "parameters" {
				out = append(out, strings.ToUpper(method)+" "+path)
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestEveryEndpointHoldsEachRoleAndAScopedIdentity(t *testing.T) {
	m := newMatrix(t)
	for _, route := range documentedRoutes(t) {
		p, ok := probes[route]
		if !assert.True(t, ok, "%s has no probe in the access matrix: add one, and a rule to the policy", route) {
			continue
		}
		for _, r := range access.Roles() {
			want := p.works
			if !r.Covers(p.least) {
				want = http.StatusForbidden
			}
			code, body := m.ts.call(m.tokens[r.String()], p.request(m, in))
			assert.Equal(t, want, code, "%s as %s: %s", route, r, body)
		}
		m.checkScoped(t, route, p)
	}
}

// checkScoped runs p as the scoped identity (an admin of site=lobby), on
// objects in and out of its scope.
func (m *matrix) checkScoped(t *testing.T, route string, p probe) {
	scoped := m.tokens["scoped"]
	code, body := m.ts.call(scoped, p.request(m, in))
	if p.scope == fleetWide {
		assert.Equal(t, http.StatusForbidden, code, "%s scoped: %s", route, body)
		assert.Contains(t, body, "covers the whole fleet", route)
		return
	}
	assert.Equal(t, p.works, code, "%s scoped, in scope: %s", route, body)
	code, body = m.ts.call(scoped, p.request(m, out))
	switch p.scope {
	case object:
		assert.Equal(t, http.StatusNotFound, code, "%s scoped, out of scope: %s", route, body)
		assert.NotContains(t, body, "scope", "%s: a 404 says nothing of the scope", route)
	case enrollment:
		assert.Equal(t, http.StatusForbidden, code, "%s scoped, out of scope: %s", route, body)
	case pending:
		assert.Equal(t, http.StatusOK, code, route)
		assert.Contains(t, body, `"status":"pending"`, "%s scoped, out of scope: as a task not known", route)
		assert.NotContains(t, body, "session_id", route)
	default:
		assert.Equal(t, p.works, code, "%s scoped: %s", route, body)
	}
}

// The message types a client may send, and what the policy answers each
// from a constellation: the least role (0: refused to all).
var messageProbes = map[protocol.ClientMessageType]access.Role{
	protocol.ClientRegister:           access.Viewer,
	protocol.ClientHeartbeat:          access.Viewer,
	protocol.ClientDeviceInfoRequest:  access.Viewer,
	protocol.ClientTaskEnd:            access.Viewer,
	protocol.ClientError:              access.Viewer,
	protocol.ClientTask:               access.Operator,
	protocol.ClientCommandResults:     0,
	protocol.ClientDeviceInfoResponse: 0,
	protocol.ClientTokenRotated:       0,
	protocol.ClientLocalCall:          0,
	protocol.ClientPreparing:          0,
}

// constellationAs connects as token and registers id with target,
// returning the registration's answer.
func (ts *testServer) constellationAs(token, id, target string) (*rawClient, protocol.ServerMessage) {
	ts.t.Helper()
	rc := ts.mustDial(token)
	rc.id = id
	rc.send(protocol.ClientMessage{Type: protocol.ClientRegister, ClientType: protocol.ClientConstellation, ClientID: id, TargetID: target})
	return rc, rc.recv()
}

func TestEveryMessageTypeHoldsEachRoleAndAScopedIdentity(t *testing.T) {
	m := newMatrix(t)
	for _, typ := range protocol.ClientMessageTypes() {
		least, ok := messageProbes[typ]
		if !assert.True(t, ok, "message type %q has no probe in the access matrix: add one, and a rule to the policy", typ) {
			continue
		}
		for _, who := range append(slices.Collect(func(yield func(string) bool) {
			for _, r := range access.Roles() {
				yield(r.String())
			}
		}), "scoped") {
			role, _ := access.ParseRole(who)
			if who == "scoped" {
				role = access.Admin
			}
			rc, ack := m.ts.constellationAs(m.tokens[who], m.fresh("orch"), m.device(in, ""))
			require.Equal(t, protocol.ServerHeartbeat, ack.Type, "%s registers: %+v", who, ack)
			m.checkMessage(t, rc, typ, least, role, who)
		}
	}
	// A target outside the scope is refused as one not connected.
	rc, answer := m.ts.constellationAs(m.tokens["scoped"], "orch-out", m.device(out, ""))
	assert.Equal(t, protocol.ServerError, answer.Type)
	assert.Equal(t, fmt.Sprintf(`register: field "target_id": target device %q is not connected`, m.device(out, "")), answer.Error)
	rc.requireClosed()
}

// checkMessage sends one message of typ and checks the answer.
func (m *matrix) checkMessage(t *testing.T, rc *rawClient, typ protocol.ClientMessageType, least, role access.Role, who string) {
	msg := protocol.ClientMessage{Type: typ, ClientID: rc.id, RequestID: "req-" + rc.id, SessionID: "s-" + rc.id}
	switch typ {
	case protocol.ClientTask:
		msg.Request, msg.Status = echoPlan, protocol.StatusContinue
	case protocol.ClientCommandResults:
		msg.PrevResponseID = "nothing"
	case protocol.ClientLocalCall:
		msg.Actions = []protocol.Command{{ToolName: "echo", CallID: "local-1"}}
		msg.ActionResults = []protocol.Result{{Status: protocol.ResultSuccess, CallID: "local-1"}}
	case protocol.ClientPreparing:
		msg.PrevResponseID = "nothing"
		msg.Preparing = &protocol.Preparing{ToolName: "echo", Stage: "compiling", Step: 2, Steps: 2}
	}
	rc.send(msg)
	allowed := least != 0 && role.Covers(least)
	switch {
	case !allowed && typ == protocol.ClientTask:
		end := rc.recvType(protocol.ServerTaskEnd)
		assert.Equal(t, protocol.StatusFailed, end.Status, who)
		assert.Contains(t, end.Error, "needs operator", "%s: %s", who, typ)
	case !allowed:
		e := rc.recvType(protocol.ServerError)
		if least == 0 {
			assert.Contains(t, e.Error, "is not accepted from a constellation", "%s: %s", who, typ)
		} else {
			assert.Contains(t, e.Error, "needs", "%s: %s", who, typ)
		}
	case typ == protocol.ClientTask:
		ack := rc.recvType(protocol.ServerHeartbeat)
		assert.Equal(t, msg.SessionID, ack.SessionID, who)
		end := rc.recvType(protocol.ServerTaskEnd)
		assert.Equal(t, protocol.StatusCompleted, end.Status, "%s: %s", who, end.Error)
	case typ == protocol.ClientDeviceInfoRequest:
		info := rc.recvType(protocol.ServerDeviceInfoResponse)
		assert.Equal(t, msg.RequestID, info.ResponseID, who)
	case typ == protocol.ClientRegister:
		// A second REGISTER on a registered link is not a message of
		// the link's: the policy let it through to the handler.
		e := rc.recvType(protocol.ServerError)
		assert.Contains(t, e.Error, "is not accepted from a constellation", who)
	case typ == protocol.ClientHeartbeat:
		ack := rc.recvType(protocol.ServerHeartbeat)
		assert.Equal(t, msg.RequestID, ack.ResponseID, who)
	default:
		rc.ping() // nothing answers it, and the link goes on
	}
}

// The access matrix's row for tool patterns: a task on a device in the
// scope, which ran tools outside the caller's patterns too, is shown with
// each step, its state and its timing, but not what tools outside the
// patterns were given or returned (nor their errors, which may echo
// either), on every surface that shows a task.

// The secrets an admin's tasks give tools outside hash_*, and that the
// device echoes back in their results and errors.
var outOfPatterns = []string{"READ-SECRET", "WRITE-SECRET", "FAIL-SECRET", "CMD-SECRET", "FLEET-SECRET"}

// filesDevice is a device in the lobby, with role=files, whose tools
// hash_file, read_file and write_file answer with their parameters, or,
// given "fail", fail with an error that names the path.
func (m *matrix) filesDevice() string {
	id := "in-files"
	resp, err := m.ts.api.Enroll(context.Background(), api.EnrollRequest{ID: id, Labels: map[string]string{"site": "lobby", "role": "files"}})
	require.NoError(m.ts.t, err)
	dev := m.ts.mustDial(resp.Token)
	dev.register(id, tool("stock", "hash_file", protocol.ToolDataCollection), tool("stock", "read_file", protocol.ToolDataCollection),
		tool("stock", "write_file", protocol.ToolAction))
	dev.serve(func(a protocol.Command) protocol.Result {
		if a.Parameters["fail"] == true {
			return protocol.Result{Status: protocol.ResultFailure, Error: fmt.Sprintf("open %v: permission denied", a.Parameters["path"])}
		}
		return protocol.Result{Status: protocol.ResultSuccess, Result: a.Parameters}
	})
	return id
}

func TestAToolScopeHidesOtherToolsOnEveryTaskSurface(t *testing.T) {
	m := newMatrix(t)
	ctx := context.Background()
	dev := m.filesDevice()
	hasher := m.ts.addIdentity("hasher", api.RoleOperator, &api.Scope{Devices: "site=lobby", Tools: []string{"hash_*"}})

	planDoc := `early_exit: false
steps:
  - {tool: hash_file, parameters: {path: HASHED-PATH}}
  - {tool: read_file, parameters: {path: /secret/READ-SECRET}}
  - {tool: write_file, parameters: {path: /etc/motd, content: WRITE-SECRET}}
  - {tool: read_file, parameters: {path: /secret/FAIL-SECRET, fail: true}}`
	d, err := m.ts.api.Dispatch(ctx, api.DispatchRequest{ClientID: dev, Request: planDoc, TaskName: "files-1"})
	require.NoError(t, err)
	planTask := m.ts.waitTask(d.SessionID)
	require.Equal(t, api.StateFailed, planTask.State, "the last step fails")

	cmd, err := m.ts.api.Command(ctx, dev, api.CommandRequest{Actions: []protocol.Command{{ToolName: "read_file", Parameters: map[string]any{"path": "/secret/CMD-SECRET", "fail": true}}}})
	require.NoError(t, err)

	fleet, err := m.ts.api.Fleet(ctx, api.FleetRequest{Labels: map[string]string{"site": "lobby", "role": "files"},
		Plan: []byte(`{"steps": [{"tool": "hash_file", "parameters": {"path": "FLEET-HASHED"}}, {"tool": "read_file", "parameters": {"path": "/secret/FLEET-SECRET", "fail": true}}]}`)})
	require.NoError(t, err)
	fleetTask := m.ts.waitTask(fleet.SessionID)
	var fleetResult api.FleetResult
	require.NoError(t, json.Unmarshal(fleetTask.Result, &fleetResult))
	require.Len(t, fleetResult.Devices, 1)
	child := fleetResult.Devices[0].SessionID

	// The admin sees everything.
	_, body := m.ts.call(m.ts.api.Token, get("/api/tasks/"+d.SessionID)(m, in))
	require.Contains(t, body, "READ-SECRET", "the device echoes what it is given")

	surfaces := map[string]string{}
	for name, path := range map[string]string{
		"plan":              "/api/tasks/" + d.SessionID,
		"plan's events":     "/api/tasks/" + d.SessionID + "/events",
		"task_result":       "/api/task_result/files-1",
		"command":           "/api/tasks/" + cmd.SessionID,
		"command's events":  "/api/tasks/" + cmd.SessionID + "/events",
		"fleet":             "/api/tasks/" + fleet.SessionID,
		"fleet's events":    "/api/tasks/" + fleet.SessionID + "/events",
		"fleet's device":    "/api/tasks/" + child,
		"device's events":   "/api/tasks/" + child + "/events",
		"audit log":         "/api/audit?device=" + dev,
		"task list":         "/api/tasks",
		"device's own view": "/api/devices/" + dev,
	} {
		code, body := m.ts.call(hasher, probeRequest{method: http.MethodGet, path: path})
		require.Equal(t, http.StatusOK, code, "%s: %s", name, body)
		surfaces[name] = body
	}
	dashboard := &browser{t: t, client: http.DefaultClient, base: m.ts.http.URL}
	require.Equal(t, http.StatusOK, dashboard.login(hasher).StatusCode)
	for name, path := range map[string]string{"the dashboard's plan": "/api/tasks/" + d.SessionID, "the dashboard's events": "/api/tasks/" + d.SessionID + "/events"} {
		code, body := m.ts.call("", probeRequest{method: http.MethodGet, path: path,
			header: http.Header{"Cookie": {dashboard.cookie.Name + "=" + dashboard.cookie.Value}}})
		require.Equal(t, http.StatusOK, code, "%s: %s", name, body)
		surfaces[name] = body
	}
	cl, _ := m.ts.mcpClient(hasher)
	for name, id := range map[string]string{"MCP get_task of the plan": d.SessionID, "MCP get_task of the command": cmd.SessionID,
		"MCP get_task of the fleet's device": child} {
		text, isErr := mcpTaskTool(t, cl, "get_task", id)
		require.False(t, isErr, "%s: %s", name, text)
		surfaces[name] = text
	}

	for name, body := range surfaces {
		for _, secret := range outOfPatterns {
			assert.NotContains(t, body, secret, "%s shows what a tool outside hash_* was given or returned", name)
		}
	}
	for _, name := range []string{"plan", "plan's events", "task_result", "MCP get_task of the plan", "the dashboard's plan", "the dashboard's events"} {
		assert.Contains(t, surfaces[name], "HASHED-PATH", "%s: hash_file's parameters and result are the caller's to see", name)
	}
	for _, name := range []string{"plan", "plan's events", "command's events", "audit log", "MCP get_task of the plan"} {
		assert.Contains(t, surfaces[name], "read_file", "%s: that read_file ran is shown", name)
	}
	for _, name := range []string{"plan", "plan's events", "command", "command's events", "fleet", "fleet's events", "audit log", "MCP get_task of the plan"} {
		assert.Contains(t, surfaces[name], "withheld", "%s: says what it leaves out", name)
	}
	assert.Contains(t, surfaces["audit log"], "HASHED-PATH", "hash_file's audit entry is whole")
	assert.Contains(t, surfaces["fleet's device"], "FLEET-HASHED")
}

// An Idempotency-Key's replay is held to the tool patterns of who asks
// now: an identity revoked and added again under its name may have
// narrower ones than the one that made the first request.
func TestAReplayIsHeldToTheToolPatternsOfWhoAsksNow(t *testing.T) {
	m := newMatrix(t)
	dev := m.filesDevice()
	first := jsonRequest(http.MethodPost, "/api/devices/"+dev+"/commands",
		api.CommandRequest{Actions: []protocol.Command{{ToolName: "read_file", Parameters: map[string]any{"path": "/secret/READ-SECRET"}}}})
	first.header.Set(api.IdempotencyKeyHeader, "once")
	code, body := m.ts.call(m.ts.addIdentity("ann", api.RoleOperator, &api.Scope{Devices: "site=lobby"}), first)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "READ-SECRET")

	require.NoError(t, m.ts.api.RevokeIdentity(context.Background(), "ann"))
	again := m.ts.addIdentity("ann", api.RoleOperator, &api.Scope{Devices: "site=lobby", Tools: []string{"hash_*"}})
	code, body = m.ts.call(again, first)
	require.Equal(t, http.StatusOK, code, body)
	assert.NotContains(t, body, "READ-SECRET")
	assert.Contains(t, body, "withheld")
}

// A pattern by type holds a call that named no type by the type its
// device lists the tool under, as admission does: read_file is the
// device's data_collection tool, write_file its action.
func TestAToolPatternByTypeTypesACallByItsDevicesInventory(t *testing.T) {
	m := newMatrix(t)
	dev := m.filesDevice()
	collector := m.ts.addIdentity("collector", api.RoleViewer, &api.Scope{Devices: "site=lobby", Tools: []string{"data_collection::*"}})
	d, err := m.ts.api.Dispatch(context.Background(), api.DispatchRequest{ClientID: dev, Request: `steps:
  - {tool_name: read_file, parameters: {path: /secret/READ-SECRET}}
  - {tool_name: write_file, parameters: {path: /etc/motd, content: WRITE-SECRET}}`})
	require.NoError(t, err)
	m.ts.waitTask(d.SessionID)

	for _, path := range []string{"/api/tasks/" + d.SessionID, "/api/tasks/" + d.SessionID + "/events", "/api/audit?session=" + d.SessionID} {
		code, body := m.ts.call(collector, probeRequest{method: http.MethodGet, path: path})
		require.Equal(t, http.StatusOK, code, body)
		assert.Contains(t, body, "READ-SECRET", "%s: read_file is a data_collection tool", path)
		assert.NotContains(t, body, "WRITE-SECRET", "%s: write_file is an action", path)
	}
}

// A call is held to the patterns by the type it was sent with, which
// admission pinned for a scoped requester: a device that no longer lists
// the tool does not hide the requester's own results from it.
func TestACallKeepsTheTypeItWasSentWithWhenItsDeviceNoLongerListsIt(t *testing.T) {
	m := newMatrix(t)
	ctx := context.Background()
	enrolled, err := m.ts.api.Enroll(ctx, api.EnrollRequest{ID: "in-typed", Labels: labelsOf(in)})
	require.NoError(t, err)
	dev := m.ts.mustDial(enrolled.Token)
	dev.register("in-typed", tool("stock", "read_file", protocol.ToolDataCollection))
	dev.serve(func(a protocol.Command) protocol.Result {
		return protocol.Result{Status: protocol.ResultSuccess, Result: a.Parameters}
	})
	collector := m.ts.addIdentity("collector", api.RoleOperator, &api.Scope{Devices: "site=lobby", Tools: []string{"data_collection::*"}})
	d, err := m.ts.as(collector).Dispatch(ctx, api.DispatchRequest{ClientID: "in-typed", Request: `steps: [{tool_name: read_file, parameters: {path: OWN-PATH}}]`})
	require.NoError(t, err)
	m.ts.waitTask(d.SessionID)

	m.ts.mustDial(enrolled.Token).register("in-typed") // it lists no tool now
	code, body := m.ts.call(collector, probeRequest{method: http.MethodGet, path: "/api/tasks/" + d.SessionID})
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "OWN-PATH")
	assert.NotContains(t, body, "withheld")
}
