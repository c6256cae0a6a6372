package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testpki"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBadIdentityRequestsAre400NamingTheField(t *testing.T) {
	ts := newTestServer(t)
	for _, tc := range []struct {
		body string
		want string
	}{
		{`{"name": "ci", "role": "superuser"}`, `field "role": "superuser": want viewer, operator, deployer or admin`},
		{`{"name": "ci"}`, `field "role": "": want viewer`},
		{`{"name": "", "role": "viewer"}`, `field "name": ""`},
		{`{"name": ".hidden", "role": "viewer"}`, `field "name": ".hidden"`},
		{`{"name": "a/b", "role": "viewer"}`, `field "name": "a/b"`},
		{`{"name": "ci", "role": "viewer", "scope": {}}`, `field "scope": empty: give devices, tools or both, or no scope at all`},
		{`{"name": "ci", "role": "viewer", "scope": {"devices": " ", "tools": []}}`, `field "scope": empty`},
		{`{"name": "ci", "role": "viewer", "scope": {"devices": "site"}}`, `field "scope.devices": "site": want KEY=VALUE or KEY!=VALUE`},
		{`{"name": "ci", "role": "viewer", "scope": {"devices": "site=lobby,=x"}}`, `field "scope.devices": "=x": label key ""`},
		{`{"name": "ci", "role": "viewer", "scope": {"tools": ["echo", "gadget::*"]}}`, `field "scope.tools[1]": "gadget::*": tool type "gadget"`},
		{`{"name": "ci", "role": "viewer", "scope": {"tools": ["hash_["]}}`, `field "scope.tools[0]": "hash_["`},
		{`{"name": "ci", "role": "viewer", "extra": 1}`, `unknown field "extra"`},
	} {
		code, body := ts.call(ts.api.Token, probeRequest{method: "POST", path: "/api/identities", body: []byte(tc.body),
			header: http.Header{"Content-Type": {"application/json"}}})
		assert.Equal(t, http.StatusBadRequest, code, tc.body)
		assert.Contains(t, body, jsonQuoted(tc.want), tc.body)
	}
	code, body := ts.call(ts.api.Token, jsonRequest("POST", "/api/identities/admin/tokens", api.IdentityRotateRequest{Grace: "forever"}))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, jsonQuoted(`field "grace": "forever": want a duration from 0s to 720h0m0s`))
	ids, err := ts.api.Identities(context.Background())
	require.NoError(t, err)
	assert.Len(t, ids, 1, "nothing was added")
}

// jsonQuoted is s as it reads inside a JSON string.
func jsonQuoted(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func TestAnIdentitysTokenIsShownOnceAndListedByIdOnly(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	added, err := ts.api.AddIdentity(ctx, api.IdentityRequest{Name: "ci@example.com", Role: api.RoleDeployer,
		Scope: &api.Scope{Devices: "site=lobby, floor != 3", Tools: []string{"data_collection::*"}}})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(added.Token, identity.OperatorTokenPrefix))
	assert.Equal(t, "ci@example.com", added.Identity)
	_, err = ts.api.AddIdentity(ctx, api.IdentityRequest{Name: "ci@example.com", Role: api.RoleViewer})
	requireStatus(t, err, http.StatusConflict, `identity "ci@example.com" exists`)

	ids, err := ts.api.Identities(ctx)
	require.NoError(t, err)
	require.Len(t, ids, 2)
	assert.Equal(t, identity.BootstrapIdentity, ids[0].Name)
	assert.Equal(t, api.RoleAdmin, ids[0].Role)
	assert.Nil(t, ids[0].Scope)
	ci := ids[1]
	assert.Equal(t, api.RoleDeployer, ci.Role)
	assert.Equal(t, &api.Scope{Devices: "floor!=3,site=lobby", Tools: []string{"data_collection::*"}}, ci.Scope, "the selector as the server reads it")
	require.Len(t, ci.Tokens, 1)
	assert.Equal(t, added.TokenID, ci.Tokens[0].ID)
	raw, _ := json.Marshal(ids)
	assert.NotContains(t, string(raw), added.Token, "a listing never holds a token")
	assert.NotContains(t, ts.logs.String(), added.Token, "nor does the log")

	me, err := ts.as(added.Token).WhoAmI(ctx)
	require.NoError(t, err)
	assert.Equal(t, api.Caller{Name: "ci@example.com", Role: api.RoleDeployer, Scope: ci.Scope, TokenID: added.TokenID}, me)
}

func TestARotationEndsTheOldTokensAtOnceOrAfterItsGrace(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	old := ts.addIdentity("ci", api.RoleViewer, nil)

	graced, err := ts.api.RotateIdentity(ctx, "ci", time.Hour)
	require.NoError(t, err)
	require.Len(t, graced.Expiring, 1)
	assert.WithinDuration(t, time.Now().Add(time.Hour), *graced.Expiring[0].ExpiresAt, time.Minute)
	for _, tok := range []string{old, graced.Token} {
		_, err := ts.as(tok).WhoAmI(ctx)
		assert.NoError(t, err, "within the grace both work")
	}

	now, err := ts.api.RotateIdentity(ctx, "ci", 0)
	require.NoError(t, err)
	assert.Len(t, now.Expiring, 2)
	for _, tok := range []string{old, graced.Token} {
		_, err := ts.as(tok).WhoAmI(ctx)
		requireStatus(t, err, http.StatusUnauthorized, "wrong operator token")
	}
	me, err := ts.as(now.Token).WhoAmI(ctx)
	require.NoError(t, err)
	assert.Equal(t, now.TokenID, me.TokenID)

	_, err = ts.api.RotateIdentity(ctx, "nobody", 0)
	requireStatus(t, err, http.StatusNotFound, `no identity "nobody"`)
}

func TestTheLastUnscopedAdminCannotBeRevokedThroughTheAPI(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	ts.addIdentity("site-admin", api.RoleAdmin, &api.Scope{Devices: "site=lobby"})
	err := ts.api.RevokeIdentity(ctx, identity.BootstrapIdentity)
	requireStatus(t, err, http.StatusConflict, `identity "admin": refused: it is the last unscoped admin`)
	me, err := ts.api.WhoAmI(ctx)
	require.NoError(t, err)
	err = ts.api.RevokeToken(ctx, identity.BootstrapIdentity, me.TokenID)
	requireStatus(t, err, http.StatusConflict, "the last unscoped admin")

	second := ts.as(ts.addIdentity("second", api.RoleAdmin, nil))
	require.NoError(t, second.RevokeIdentity(ctx, identity.BootstrapIdentity))
	_, err = ts.api.WhoAmI(ctx)
	requireStatus(t, err, http.StatusUnauthorized, "")
	err = second.RevokeIdentity(ctx, identity.BootstrapIdentity)
	requireStatus(t, err, http.StatusNotFound, `no identity "admin"`)
}

func TestAdminTokenIsTheBootstrapAdminUntilRevokedAndStaysRevokedAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s1, err := New(ctx, Config{DataDir: dir})
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, AdminTokenFile))
	require.NoError(t, err)
	bootstrap := strings.TrimSpace(string(b))
	c, err := s1.auth.CallerByToken(ctx, bootstrap)
	require.NoError(t, err)
	assert.Equal(t, identity.BootstrapIdentity, c.Name)
	token, rec := identity.NewOperatorToken("other")
	require.NoError(t, s1.store.Write(ctx, func(tx *store.Tx) error {
		if err := tx.Identities().Create(store.Identity{Name: "other", Role: "admin"}, rec); err != nil {
			return err
		}
		_, err := tx.Identities().Delete(identity.BootstrapIdentity)
		return err
	}))
	s1.Close()

	// admin.token stays as it was, but does not come back to life.
	s2, err := New(ctx, Config{DataDir: dir})
	require.NoError(t, err)
	defer s2.Close()
	_, err = s2.auth.CallerByToken(ctx, bootstrap)
	assert.ErrorIs(t, err, identity.ErrWrongToken)
	c, err = s2.auth.CallerByToken(ctx, token)
	require.NoError(t, err)
	assert.Equal(t, "other", c.Name)
}

func TestTheAuditLogNamesTheIdentityAndTokenOfEveryCallAndChange(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	dev.serveOK()
	ctx := context.Background()
	ann, err := ts.api.AddIdentity(ctx, api.IdentityRequest{Name: "ann", Role: api.RoleOperator})
	require.NoError(t, err)
	_, err = ts.as(ann.Token).Command(ctx, "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
	require.NoError(t, err)
	con, _ := ts.constellationAs(ann.Token, "orch-1", "kiosk-1")
	con.task("s-1", "", echoPlan)
	con.recvType(protocol.ServerTaskEnd)
	since := time.Now()
	rotated, err := ts.api.RotateIdentity(ctx, "ann", 0)
	require.NoError(t, err)
	me, err := ts.api.WhoAmI(ctx)
	require.NoError(t, err)

	entries, err := ts.api.Audit(ctx, api.AuditQuery{})
	require.NoError(t, err)
	type line struct{ actor, identity, token, action, device, tool string }
	var got []line
	for _, e := range entries {
		got = append(got, line{e.Actor, e.Identity, e.TokenID, e.Action, e.DeviceID, e.Tool})
	}
	assert.Equal(t, []line{
		{"operator", "admin", me.TokenID, api.ActionDeviceEnroll, "kiosk-1", ""},
		{"operator", "admin", me.TokenID, api.ActionIdentityAdd, "", ""},
		{"operator", "ann", ann.TokenID, "", "kiosk-1", "echo"},
		{"constellation:orch-1", "ann", ann.TokenID, "", "kiosk-1", "echo"},
		{"operator", "admin", me.TokenID, api.ActionIdentityRotate, "", ""},
	}, got)
	assert.JSONEq(t, `{"name":"ann","role":"operator","token_id":"`+ann.TokenID+`","scope":null}`, string(entries[1].Parameters))
	assert.JSONEq(t, `{"name":"ann","token_id":"`+rotated.TokenID+`","grace":"0s","ending":["`+ann.TokenID+`"]}`, string(entries[4].Parameters))

	byAnn, err := ts.api.Audit(ctx, api.AuditQuery{Identity: "ann"})
	require.NoError(t, err)
	assert.Len(t, byAnn, 2)
	recent, err := ts.api.Audit(ctx, api.AuditQuery{Since: since})
	require.NoError(t, err)
	require.Len(t, recent, 1)
	assert.Equal(t, api.ActionIdentityRotate, recent[0].Action)
	code, body := ts.call(ts.api.Token, probeRequest{method: "GET", path: "/api/audit?since=yesterday"})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, `query \"since\": \"yesterday\" is not an RFC 3339 time`)

	task, err := ts.api.Task(ctx, "s-1")
	require.NoError(t, err)
	assert.Equal(t, api.Requester{Kind: api.RequesterConstellation, ID: "orch-1", Identity: "ann", TokenID: ann.TokenID}, task.Requester)
}

// A device's credentials change under an identity's name too: enrolling
// with a certificate, signing one, asking for a token rotation.
func TestDeviceCredentialChangesAreAuditedWithTheirIdentity(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.TLS = newPKI(t, true).files })
	ctx := context.Background()
	csr, _ := testpki.Request(t, "kiosk-1")
	_, err := ts.api.Enroll(ctx, api.EnrollRequest{ID: "kiosk-1", CSR: string(csr)})
	require.NoError(t, err)
	signed, err := ts.api.SignCertificate(ctx, "kiosk-1", api.CertificateRequest{CSR: string(csr)})
	require.NoError(t, err)
	_, err = ts.api.RotateToken(ctx, "kiosk-1", api.RotateRequest{Grace: "1h"})
	require.NoError(t, err)
	me, err := ts.api.WhoAmI(ctx)
	require.NoError(t, err)

	entries, err := ts.api.Audit(ctx, api.AuditQuery{Device: "kiosk-1"})
	require.NoError(t, err)
	require.Len(t, entries, 3)
	for i, action := range []string{api.ActionDeviceEnroll, api.ActionDeviceCertificate, api.ActionDeviceRotateToken} {
		assert.Equal(t, action, entries[i].Action)
		assert.Equal(t, identity.BootstrapIdentity, entries[i].Identity, action)
		assert.Equal(t, me.TokenID, entries[i].TokenID, action)
	}
	assert.Contains(t, string(entries[0].Parameters), `"certificate_serial":`)
	assert.JSONEq(t, `{"serial":"`+signed.Serial+`"}`, string(entries[1].Parameters))
	assert.JSONEq(t, `{"grace":"1h0m0s"}`, string(entries[2].Parameters))
}
