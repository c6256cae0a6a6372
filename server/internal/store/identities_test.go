package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func addIdentity(t *testing.T, s *Store, name, role, devices string, tokenID string) {
	t.Helper()
	write(t, s, func(tx *Tx) error {
		return tx.Identities().Create(Identity{Name: name, Role: role, Devices: devices}, Token{ID: tokenID, Hash: "hash-" + tokenID})
	})
}

func TestAnIdentityIsFoundByItsTokensHashUntilRevoked(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	addIdentity(t, s, "root", "admin", "", "t0")
	write(t, s, func(tx *Tx) error {
		return tx.Identities().Create(Identity{Name: "ci", Role: "operator", Devices: "site=lobby", Tools: []string{"data_collection::*"}},
			Token{ID: "t1", Hash: "hash-t1"})
	})
	err := s.Write(ctx, func(tx *Tx) error {
		return tx.Identities().Create(Identity{Name: "ci", Role: "viewer"}, Token{ID: "t9", Hash: "h9"})
	})
	assert.ErrorIs(t, err, ErrExists)

	id, tok, err := s.Identities().TokenByHash(ctx, "hash-t1")
	require.NoError(t, err)
	assert.Equal(t, "ci", id.Name)
	assert.Equal(t, "operator", id.Role)
	assert.Equal(t, "site=lobby", id.Devices)
	assert.Equal(t, []string{"data_collection::*"}, id.Tools)
	assert.Equal(t, "t1", tok.ID)
	_, _, err = s.Identities().TokenByHash(ctx, "hash-nothing")
	assert.ErrorIs(t, err, ErrNotFound)

	write(t, s, func(tx *Tx) error { return tx.Identities().AddToken(Token{ID: "t2", Identity: "ci", Hash: "hash-t2"}) })
	all, err := s.Identities().All(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.Equal(t, "ci", all[0].Name)
	assert.Len(t, all[0].Tokens, 2)
	assert.Nil(t, all[1].Tools, "unscoped")

	var ids []string
	write(t, s, func(tx *Tx) (err error) { ids, err = tx.Identities().Delete("ci"); return err })
	assert.ElementsMatch(t, []string{"t1", "t2"}, ids)
	_, _, err = s.Identities().TokenByHash(ctx, "hash-t2")
	assert.ErrorIs(t, err, ErrNotFound, "its tokens went with it")
	err = s.Write(ctx, func(tx *Tx) error { _, err := tx.Identities().Delete("ci"); return err })
	assert.ErrorIs(t, err, ErrNotFound)
	err = s.Write(ctx, func(tx *Tx) error { return tx.Identities().AddToken(Token{ID: "t3", Identity: "ci", Hash: "h3"}) })
	assert.ErrorIs(t, err, ErrNotFound)
}

func TestTheLastUnscopedAdminCannotBeRevoked(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	addIdentity(t, s, "root", "admin", "", "t0")
	addIdentity(t, s, "lobby-admin", "admin", "site=lobby", "t1")
	err := s.Write(ctx, func(tx *Tx) error { _, err := tx.Identities().Delete("root"); return err })
	assert.ErrorIs(t, err, ErrLastAdmin, "a scoped admin cannot manage identities")
	err = s.Write(ctx, func(tx *Tx) error { return tx.Identities().DeleteToken("root", "t0") })
	assert.ErrorIs(t, err, ErrLastAdmin)
	_, _, err = s.Identities().TokenByHash(ctx, "hash-t0")
	assert.NoError(t, err, "the refused revocation was rolled back")

	addIdentity(t, s, "root2", "admin", "", "t2")
	write(t, s, func(tx *Tx) error { _, err := tx.Identities().Delete("root"); return err })
	write(t, s, func(tx *Tx) error { _, err := tx.Identities().Delete("lobby-admin"); return err })
}

func TestARotationExpiresTheOtherTokensAtOnceOrAfterAGrace(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	addIdentity(t, s, "ci", "operator", "", "old")
	write(t, s, func(tx *Tx) error {
		return tx.Identities().AddToken(Token{ID: "new", Identity: "ci", Hash: "hash-new"})
	})
	var expired []string
	write(t, s, func(tx *Tx) (err error) {
		expired, err = tx.Identities().ExpireTokens("ci", "new", time.Now().Add(time.Hour))
		return err
	})
	assert.Equal(t, []string{"old"}, expired)
	_, tok, err := s.Identities().TokenByHash(ctx, "hash-old")
	require.NoError(t, err, "within its grace the old token works")
	assert.WithinDuration(t, time.Now().Add(time.Hour), tok.ExpiresAt, time.Minute)

	write(t, s, func(tx *Tx) error {
		return tx.Identities().AddToken(Token{ID: "newer", Identity: "ci", Hash: "hash-newer"})
	})
	write(t, s, func(tx *Tx) (err error) {
		expired, err = tx.Identities().ExpireTokens("ci", "newer", time.Now())
		return err
	})
	assert.ElementsMatch(t, []string{"old", "new"}, expired)
	for _, h := range []string{"hash-old", "hash-new"} {
		_, _, err = s.Identities().TokenByHash(ctx, h)
		assert.ErrorIs(t, err, ErrNotFound, h)
	}
	id, err := s.Identities().Get(ctx, "ci")
	require.NoError(t, err)
	require.Len(t, id.Tokens, 1)
	assert.Equal(t, "newer", id.Tokens[0].ID)

	err = s.Write(ctx, func(tx *Tx) error { _, err := tx.Identities().ExpireTokens("ci", "gone", time.Now()); return err })
	assert.ErrorIs(t, err, ErrNotFound)
}

func TestALoginLastsUntilItExpiresOrItsTokenGoes(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	addIdentity(t, s, "root", "admin", "", "t0")
	addIdentity(t, s, "ann", "viewer", "", "t1")
	write(t, s, func(tx *Tx) error { return tx.Identities().CreateLogin("login-a", "t1", time.Now().Add(time.Hour), 10) })
	write(t, s, func(tx *Tx) error {
		return tx.Identities().CreateLogin("login-old", "t1", time.Now().Add(-time.Second), 10)
	})
	id, tok, err := s.Identities().Login(ctx, "login-a")
	require.NoError(t, err)
	assert.Equal(t, "ann", id.Name)
	assert.Equal(t, "t1", tok.ID)
	_, _, err = s.Identities().Login(ctx, "login-old")
	assert.ErrorIs(t, err, ErrNotFound, "expired")

	write(t, s, func(tx *Tx) error { return tx.Identities().DeleteToken("ann", "t1") })
	_, _, err = s.Identities().Login(ctx, "login-a")
	assert.ErrorIs(t, err, ErrNotFound, "its token was revoked")

	// At most max logins: the oldest go.
	for i, h := range []string{"l1", "l2", "l3"} {
		write(t, s, func(tx *Tx) error {
			return tx.Identities().CreateLogin(h, "t0", time.Now().Add(time.Duration(i+1)*time.Minute), 2)
		})
	}
	_, _, err = s.Identities().Login(ctx, "l1")
	assert.ErrorIs(t, err, ErrNotFound)
	for _, h := range []string{"l2", "l3"} {
		_, _, err = s.Identities().Login(ctx, h)
		assert.NoError(t, err, h)
	}
	write(t, s, func(tx *Tx) error { return tx.Identities().DeleteLogin("l2") })
	_, _, err = s.Identities().Login(ctx, "l2")
	assert.ErrorIs(t, err, ErrNotFound)

	var n int
	write(t, s, func(tx *Tx) (err error) {
		n, err = tx.Identities().DeleteExpiredCredentials(time.Now().Add(2 * time.Hour))
		return err
	})
	assert.Equal(t, 1, n, "l3: login-old went with its token")
}

func TestTheAuditLogNamesWhoAndIsReadByIdentityTimeAndScope(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	for i, dev := range []string{"kiosk-1", "kiosk-2"} {
		c := Command{ResponseID: "r" + dev, DeviceID: dev, SessionID: "s", Actor: "operator", By: By{Identity: []string{"ann", "bob"}[i], TokenID: "tok"},
			Actions: []protocol.Command{{ToolName: "echo", CallID: "c" + dev}}}
		write(t, s, func(tx *Tx) error { return tx.Commands().Insert(c) })
		write(t, s, func(tx *Tx) error {
			_, err := tx.Commands().RecordResults(dev, c.ResponseID, []protocol.Result{{Status: protocol.ResultSuccess, CallID: "c" + dev}})
			return err
		})
	}
	before := time.Now()
	write(t, s, func(tx *Tx) error {
		return tx.Audit().Append(AuditEntry{Actor: "operator", By: By{Identity: "root", TokenID: "t0"}, Action: "identity.add",
			Parameters: json.RawMessage(`{"name":"ann","role":"viewer"}`)})
	})

	read := func(f AuditFilter) []string {
		f.Limit = 100
		entries, err := s.Audit().List(ctx, f)
		require.NoError(t, err)
		var out []string
		for _, e := range entries {
			out = append(out, e.Identity+"/"+e.TokenID+"/"+e.DeviceID+"/"+e.Action)
		}
		return out
	}
	assert.Equal(t, []string{"ann/tok/kiosk-1/", "bob/tok/kiosk-2/", "root/t0//identity.add"}, read(AuditFilter{}))
	assert.Equal(t, []string{"bob/tok/kiosk-2/"}, read(AuditFilter{Identity: "bob"}))
	assert.Equal(t, []string{"root/t0//identity.add"}, read(AuditFilter{Since: before}))
	assert.Equal(t, []string{"ann/tok/kiosk-1/"}, read(AuditFilter{OnlyDevices: []string{"kiosk-1"}}))
	assert.Empty(t, read(AuditFilter{OnlyDevices: []string{}}), "a scope with no device sees nothing")
}
