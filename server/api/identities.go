package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Roles, from least to most: each may do all that the ones before it may.
const (
	// RoleViewer reads devices, tools, tasks, task events, the audit log
	// and metrics.
	RoleViewer = "viewer"
	// RoleOperator also runs commands, plans and fleets, and cancels and
	// removes tasks.
	RoleOperator = "operator"
	// RoleDeployer also deploys tools.
	RoleDeployer = "deployer"
	// RoleAdmin may do everything: enroll and revoke devices, and manage
	// identities (an unscoped admin only).
	RoleAdmin = "admin"
)

// Scope narrows an identity's role to some devices and tools; what is
// outside it answers as if it did not exist (404).
type Scope struct {
	// Devices is a label selector: "site=lobby,floor!=3" ("k=v" and
	// "k!=v", all of them must hold). Empty: every device.
	Devices string `json:"devices,omitempty"`
	// Tools are the tools it may call and see: "TYPE::GLOB" (TYPE
	// action, data_collection or *) or "GLOB" for any type, GLOB a shell
	// pattern on the tool's name, e.g. "data_collection::*", "hash_*".
	// Empty: every tool.
	Tools []string `json:"tools,omitempty"`
}

// IdentityRequest is the body of POST /api/identities.
type IdentityRequest struct {
	// Name is 1-64 of [A-Za-z0-9._@-], not starting with '.'.
	Name string `json:"name"`
	Role string `json:"role"`
	// Scope, if set, narrows the role; it must narrow something.
	Scope *Scope `json:"scope,omitempty"`
}

// Identity is an operator identity, with its live tokens.
type Identity struct {
	Name      string          `json:"name"`
	Role      string          `json:"role"`
	Scope     *Scope          `json:"scope,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	Tokens    []IdentityToken `json:"tokens"`
}

// IdentityToken is one token of an identity: its public id, never the
// token itself, which is shown once.
type IdentityToken struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is set on a token a rotation ends: it stops working then.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// IdentityRotateRequest is the body of POST /api/identities/{name}/tokens.
type IdentityRotateRequest struct {
	// Grace is how long the identity's other tokens keep working, a Go
	// duration; empty or "0s": they stop at once.
	Grace string `json:"grace,omitempty"`
}

// TokenResponse carries a new token: the server keeps only its hash, so
// this is the one time it can be read.
type TokenResponse struct {
	Identity string `json:"identity"`
	TokenID  string `json:"token_id"`
	Token    string `json:"token"`
	// Expiring lists, after a rotation, the tokens it ends, and when.
	Expiring []IdentityToken `json:"expiring,omitempty"`
}

// Caller is the body of GET /api/whoami: the identity a request acts
// for, and the token it used.
type Caller struct {
	Name    string `json:"name"`
	Role    string `json:"role"`
	Scope   *Scope `json:"scope,omitempty"`
	TokenID string `json:"token_id"`
}

// AddIdentity creates an identity and returns its first token.
func (c *Client) AddIdentity(ctx context.Context, req IdentityRequest) (TokenResponse, error) {
	var out TokenResponse
	err := c.Do(ctx, http.MethodPost, "/api/identities", req, &out)
	return out, err
}

// Identities lists the identities with their live tokens.
func (c *Client) Identities(ctx context.Context) ([]Identity, error) {
	var out []Identity
	err := c.Do(ctx, http.MethodGet, "/api/identities", nil, &out)
	return out, err
}

// RevokeIdentity revokes an identity: its tokens stop working, and what
// they have open (event streams, constellation links, dashboard logins)
// closes.
func (c *Client) RevokeIdentity(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, "/api/identities/"+url.PathEscape(name), nil, nil)
}

// RotateIdentity gives an identity a new token; its other tokens stop
// working after grace (at once if 0).
func (c *Client) RotateIdentity(ctx context.Context, name string, grace time.Duration) (TokenResponse, error) {
	var out TokenResponse
	err := c.Do(ctx, http.MethodPost, "/api/identities/"+url.PathEscape(name)+"/tokens", IdentityRotateRequest{Grace: grace.String()}, &out)
	return out, err
}

// RevokeToken revokes one token of an identity.
func (c *Client) RevokeToken(ctx context.Context, name, tokenID string) error {
	return c.Do(ctx, http.MethodDelete, "/api/identities/"+url.PathEscape(name)+"/tokens/"+url.PathEscape(tokenID), nil, nil)
}

// WhoAmI returns the identity the client's token acts for.
func (c *Client) WhoAmI(ctx context.Context) (Caller, error) {
	var out Caller
	err := c.Do(ctx, http.MethodGet, "/api/whoami", nil, &out)
	return out, err
}

// The actions of audit entries that record a change rather than a tool
// call.
const (
	ActionDeviceEnroll        = "device.enroll"
	ActionDeviceRevoke        = "device.revoke"
	ActionDeviceRotateToken   = "device.rotate_token"
	ActionDeviceCertificate   = "device.certificate"
	ActionIdentityAdd         = "identity.add"
	ActionIdentityRevoke      = "identity.revoke"
	ActionIdentityRotate      = "identity.rotate"
	ActionIdentityRevokeToken = "identity.revoke_token"
)

// AuditQuery picks entries of GET /api/audit: each field that is set
// must match. Since keeps the entries written at or after it; After, the
// entries after that sequence number, for paging; Limit bounds how many
// (the server's default, 100, if 0; at most 1000).
type AuditQuery struct {
	Device   string
	Session  string
	Identity string
	Since    time.Time
	After    int64
	Limit    int
}

// Audit returns one page of the audit log, oldest first, as q picks it.
func (c *Client) Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, error) {
	v := url.Values{}
	for k, s := range map[string]string{"device": q.Device, "session": q.Session, "identity": q.Identity} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if q.After != 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	path := "/api/audit"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out []AuditEntry
	err := c.Do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}
