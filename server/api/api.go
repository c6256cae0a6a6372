// Package api defines the server's operator HTTP API: the request and
// response bodies, and a Go client for them. It imports nothing heavy, so
// that aipctl stays small.
//
// Every endpoint takes `Authorization: Bearer <operator token>`; UFO's
// `X-API-Key` header is accepted too. A token acts for an operator
// identity (see [Identity]), whose role and scope decide what it may do
// and see. Errors come back as an [Error] body with a non-2xx status.
package api

import (
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
)

// Error is the body of every failed request. Sessions is set on 503s
// caused by the limit on concurrent sessions: how many are running.
// Problems is set on a 400 from admission, the checks every command, plan
// and fleet passes before anything is recorded or sent: each thing wrong
// with the request, all of them, in the request's order. Error then lists
// them too.
type Error struct {
	Error    string    `json:"error"`
	Sessions int       `json:"sessions,omitempty"`
	Problems []Problem `json:"problems,omitempty"`
}

// Problem is one reason admission refused a request: where in the request
// (e.g. "steps[2].tool", "actions[0].parameters.path", "plan") and what is
// wrong there.
type Problem struct {
	Path    string `json:"path"`
	Problem string `json:"problem"`
}

// String is the problem as Error lists it: "path: problem".
func (p Problem) String() string { return p.Path + ": " + p.Problem }

// EnrollRequest is the body of POST /api/devices.
type EnrollRequest struct {
	ID     string            `json:"id"`
	Labels map[string]string `json:"labels,omitempty"`
	// CSR is a PEM certificate request of the device's key: the server
	// signs a certificate for the device with it (see CertificateRequest).
	CSR string `json:"csr,omitempty"`
}

// EnrollResponse carries the device token. The server keeps only its hash,
// so this is the one time it can be read. Certificate is the device's
// certificate, PEM, when the request carried a CSR.
type EnrollResponse struct {
	ID          string `json:"id"`
	Token       string `json:"token"`
	Certificate string `json:"certificate,omitempty"`
}

// CertificateRequest is the body of POST /api/devices/{id}/certificate: a
// PEM certificate request of the device's key. The server signs a
// certificate naming the device (DNS name ID.devices.edgeaip) with its
// device CA; whatever else the request asks for is ignored.
type CertificateRequest struct {
	CSR string `json:"csr"`
}

// Certificate is a device certificate the server signed.
type Certificate struct {
	ID          string    `json:"id"`
	Certificate string    `json:"certificate"` // PEM
	Serial      string    `json:"serial"`      // hex
	NotAfter    time.Time `json:"not_after"`
}

// RotateRequest is the body of POST /api/devices/{id}/token.
type RotateRequest struct {
	// Grace is how long the old token keeps working once the device has
	// confirmed the new one, e.g. "1h". Default 0: it stops at once.
	Grace string `json:"grace,omitempty"`
	// Wait is how long the call waits for the device to confirm, e.g.
	// "10s", at most 60 s. Default 10 s.
	Wait string `json:"wait,omitempty"`
}

// The states of a TokenRotation.
const (
	// RotationConfirmed: the device keeps its new token; the old one is
	// retired.
	RotationConfirmed = "confirmed"
	// RotationPending: the device has not confirmed yet. It gets a new
	// token when it is next linked, the old one working until then.
	RotationPending = "pending"
)

// Bounds of RotateRequest.Wait.
const (
	DefaultRotateWait = 10 * time.Second
	MaxRotateWait     = time.Minute
)

// ParseRotateWait reads RotateRequest.Wait: DefaultRotateWait if empty.
func ParseRotateWait(s string) (time.Duration, error) {
	if s == "" {
		return DefaultRotateWait, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > MaxRotateWait {
		return 0, fmt.Errorf("field \"wait\": %q: want a duration from 0s to %s", s, MaxRotateWait)
	}
	return d, nil
}

// ParseGrace reads RotateRequest.Grace: 0 if empty.
func ParseGrace(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("field \"grace\": %q is not a duration of 0s or more", s)
	}
	return d, nil
}

// TokenRotation is the state of a rotation of a device's token.
type TokenRotation struct {
	ID          string    `json:"id"`
	State       string    `json:"state"` // RotationConfirmed or RotationPending
	Grace       string    `json:"grace"`
	RequestedAt time.Time `json:"requested_at"`
	// SentAt is when a new token last went to the device, if one did.
	SentAt *time.Time `json:"sent_at,omitempty"`
	// Error is why the device, or its link, last could not take one.
	Error string `json:"error,omitempty"`
}

// Device is one enrolled device, as GET /api/devices lists it.
type Device struct {
	ID        string               `json:"id"`
	Online    bool                 `json:"online"`
	Labels    map[string]string    `json:"labels"`
	CreatedAt time.Time            `json:"created_at"`
	LastSeen  *time.Time           `json:"last_seen,omitempty"`
	Info      *protocol.SystemInfo `json:"info,omitempty"`
	// TokenRotation is a rotation of its token it has not confirmed.
	TokenRotation *TokenRotation `json:"token_rotation,omitempty"`
}

// CommandRequest is the body of POST /api/devices/{id}/commands.
type CommandRequest struct {
	Actions []protocol.Command `json:"actions"`
	// Timeout bounds the wait for results, e.g. "30s". Default 30 s.
	Timeout string `json:"timeout,omitempty"`
	// WaitForDevice makes the command wait, unsent, within Timeout, for a
	// device that is not online to register again, whatever the reason:
	// one that shut down on purpose (whose commands otherwise fail at
	// once, "device shut down"), one past its grace, one not seen yet.
	WaitForDevice bool `json:"wait_for_device,omitempty"`
	// IdempotencyKey goes in the Idempotency-Key header, not the body.
	// The server runs a request with a key its sender used in the last
	// 24 h only once: a repeat gets the first request's answer. The
	// Client makes a fresh key for each call that has none; give one to
	// repeat a call whose answer was lost.
	IdempotencyKey string `json:"-"`
}

// CommandResponse is the outcome of a command: one Result per action, in
// order, each with its call_id. Status is "success" when every action
// succeeded and "failure" otherwise. The command runs as a session of its
// own, SessionID, so that GET /api/tasks/{id} and the audit log show it.
type CommandResponse struct {
	ResponseID string            `json:"response_id"`
	SessionID  string            `json:"session_id"`
	DeviceID   string            `json:"device_id"`
	Status     string            `json:"status"`
	Results    []protocol.Result `json:"results"`
}

// NewCommandResponse is the response of a command with these results.
func NewCommandResponse(responseID, sessionID, deviceID string, results []protocol.Result) CommandResponse {
	r := CommandResponse{ResponseID: responseID, SessionID: sessionID, DeviceID: deviceID,
		Status: string(protocol.ResultSuccess), Results: results}
	if r.FirstError() != "" {
		r.Status = string(protocol.ResultFailure)
	}
	return r
}

// Succeeded reports whether every action succeeded.
func (r *CommandResponse) Succeeded() bool { return r.Status == string(protocol.ResultSuccess) }

// FirstError describes the first action that did not succeed, or is empty.
func (r *CommandResponse) FirstError() string { return FirstError(r.Results) }

// FirstError describes the first of a command's results that is not a
// success, or is empty if they all are.
func FirstError(results []protocol.Result) string {
	for _, res := range results {
		switch {
		case res.Status == protocol.ResultSuccess:
		case res.Error != "":
			return res.Error
		default:
			return fmt.Sprintf("call %s: %s", res.CallID, res.Status)
		}
	}
	return ""
}

// Health is the body of GET /api/health: Status is "healthy", or
// "degraded" (with status 503) while the server's database cannot take
// writes, or it holds writes the database has not taken yet, and Cause
// says which. OnlineClients is filled in, as UFO's server does, only for
// a request that carries the operator token.
type Health struct {
	Status        string   `json:"status"`
	Cause         string   `json:"cause,omitempty"`
	OnlineClients []string `json:"online_clients,omitempty"`
}

// DefaultCommandTimeout is used when a CommandRequest names none.
const DefaultCommandTimeout = 30 * time.Second

// ParseTimeout reads a CommandRequest timeout; empty gives the default.
func ParseTimeout(s string) (time.Duration, error) {
	if s == "" {
		return DefaultCommandTimeout, nil
	}
	return time.ParseDuration(s)
}

// LoginRequest is the body of POST /api/login, the dashboard's login.
type LoginRequest struct {
	Token string `json:"token"`
}

// LoginResponse says when the login cookie the answer sets expires.
type LoginResponse struct {
	ExpiresAt time.Time `json:"expires_at"`
}
