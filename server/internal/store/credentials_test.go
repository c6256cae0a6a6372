package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func tokenOwner(t *testing.T, s *Store, hash string) (TokenMatch, error) {
	t.Helper()
	return s.Devices().ByToken(context.Background(), hash)
}

// A rotation goes: asked for, sent (the new token works beside the old),
// confirmed (the new one is the device's, the old one retired until its
// grace ends). A token sent again replaces the one sent before.
func TestATokenRotationRetiresTheOldTokenOnlyOnceConfirmed(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	write(t, s, func(tx *Tx) error { return tx.Devices().Create("kiosk-1", "h-old", nil) })
	assert.ErrorIs(t, s.Write(ctx, func(tx *Tx) error { return tx.Devices().RequestRotation("nobody", 0) }), ErrNotFound)
	assert.ErrorIs(t, s.Write(ctx, func(tx *Tx) error { return tx.Devices().SendRotation("kiosk-1", "h-new") }), ErrNotFound,
		"nothing is sent for a rotation no one asked for")

	write(t, s, func(tx *Tx) error { return tx.Devices().RequestRotation("kiosk-1", time.Hour) })
	d, err := s.Devices().Get(ctx, "kiosk-1")
	require.NoError(t, err)
	require.NotNil(t, d.Rotation)
	assert.Equal(t, time.Hour, d.Rotation.Grace)
	assert.True(t, d.Rotation.SentAt.IsZero())

	write(t, s, func(tx *Tx) error { return tx.Devices().SendRotation("kiosk-1", "h-lost") })
	write(t, s, func(tx *Tx) error { return tx.Devices().FailRotation("kiosk-1", "link dropped") })
	write(t, s, func(tx *Tx) error { return tx.Devices().SendRotation("kiosk-1", "h-new") })
	_, err = tokenOwner(t, s, "h-lost")
	assert.ErrorIs(t, err, ErrNotFound, "a token sent again replaces the one sent before")
	m, err := tokenOwner(t, s, "h-new")
	require.NoError(t, err)
	assert.Equal(t, TokenSent, m.Kind)
	assert.Equal(t, "kiosk-1", m.Device.ID)
	assert.Empty(t, m.Device.Rotation.Error, "sending again clears the last failure")
	m, err = tokenOwner(t, s, "h-old")
	require.NoError(t, err)
	assert.Equal(t, TokenCurrent, m.Kind, "the old token works until the device confirms")

	assert.ErrorIs(t, s.Write(ctx, func(tx *Tx) error { return tx.Devices().ConfirmRotation("kiosk-1", "h-lost") }), ErrNotFound)
	before := time.Now()
	write(t, s, func(tx *Tx) error { return tx.Devices().ConfirmRotation("kiosk-1", "h-new") })
	m, err = tokenOwner(t, s, "h-new")
	require.NoError(t, err)
	assert.Equal(t, TokenCurrent, m.Kind)
	assert.Nil(t, m.Device.Rotation)
	m, err = tokenOwner(t, s, "h-old")
	require.NoError(t, err)
	assert.Equal(t, TokenRetired, m.Kind)
	assert.WithinRange(t, m.Until, before.Add(time.Hour), time.Now().Add(time.Hour))
	assert.ErrorIs(t, s.Write(ctx, func(tx *Tx) error { return tx.Devices().ConfirmRotation("kiosk-1", "h-new") }), ErrNotFound,
		"a rotation is confirmed once")
}

// Revoking a device ends its rotation and its retired tokens, and revokes
// its certificates for good: enrolling the id again does not make them
// good again.
func TestRevokingADeviceRevokesItsCertificatesForGood(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	write(t, s, func(tx *Tx) error { return tx.Devices().Create("kiosk-1", "h-1", nil) })
	write(t, s, func(tx *Tx) error { return tx.Devices().RequestRotation("kiosk-1", time.Hour) })
	write(t, s, func(tx *Tx) error { return tx.Devices().SendRotation("kiosk-1", "h-2") })
	write(t, s, func(tx *Tx) error { return tx.Devices().ConfirmRotation("kiosk-1", "h-2") })
	write(t, s, func(tx *Tx) error { return tx.Devices().RequestRotation("kiosk-1", 0) })
	write(t, s, func(tx *Tx) error { return tx.Devices().SendRotation("kiosk-1", "h-3") })
	cert := DeviceCert{SHA256: "c0ffee", DeviceID: "kiosk-1", Serial: "01", NotAfter: time.Now().Add(time.Hour), Signed: true}
	write(t, s, func(tx *Tx) error { return tx.Devices().AddCertificate(cert) })
	write(t, s, func(tx *Tx) error {
		return tx.Devices().AddCertificate(DeviceCert{SHA256: "c0ffee", DeviceID: "other", Serial: "02"})
	})
	got, err := s.Devices().Certificate(ctx, "c0ffee")
	require.NoError(t, err)
	assert.Equal(t, "kiosk-1", got.DeviceID, "a certificate is recorded once")
	assert.True(t, got.Signed)
	assert.True(t, got.RevokedAt.IsZero())

	write(t, s, func(tx *Tx) error { return tx.Devices().Delete("kiosk-1") })
	write(t, s, func(tx *Tx) error { return tx.Devices().Create("kiosk-1", "h-4", nil) })
	for _, h := range []string{"h-1", "h-2", "h-3"} {
		_, err := tokenOwner(t, s, h)
		assert.ErrorIs(t, err, ErrNotFound, h)
	}
	d, err := s.Devices().Get(ctx, "kiosk-1")
	require.NoError(t, err)
	assert.Nil(t, d.Rotation)
	got, err = s.Devices().Certificate(ctx, "c0ffee")
	require.NoError(t, err)
	assert.False(t, got.RevokedAt.IsZero(), "still revoked after the id was enrolled again")
	_, err = s.Devices().Certificate(ctx, "unknown")
	assert.ErrorIs(t, err, ErrNotFound)
}

func TestTheWireOfADevicesLastLinkIsKept(t *testing.T) {
	s, _ := openTest(t)
	write(t, s, func(tx *Tx) error { return tx.Devices().Create("kiosk-1", "h-1", nil) })
	d, err := s.Devices().Get(context.Background(), "kiosk-1")
	require.NoError(t, err)
	assert.Empty(t, d.Wire, "never linked")
	write(t, s, func(tx *Tx) error { return tx.Devices().LinkedOver("kiosk-1", "json") })
	d, err = s.Devices().Get(context.Background(), "kiosk-1")
	require.NoError(t, err)
	assert.Equal(t, "json", d.Wire)
}

// Revoking a device keeps its tokens, current, sent by a rotation and
// retired, as revoked, and so does revoking an identity, or one of its
// tokens: whose each was, and when. Tokens never revoked are not there.
func TestRevokingKeepsTheTokensAsRevoked(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	write(t, s, func(tx *Tx) error { return tx.Devices().Create("kiosk-1", "h-old", nil) })
	write(t, s, func(tx *Tx) error { return tx.Devices().RequestRotation("kiosk-1", time.Hour) })
	write(t, s, func(tx *Tx) error { return tx.Devices().SendRotation("kiosk-1", "h-new") })
	write(t, s, func(tx *Tx) error { return tx.Devices().ConfirmRotation("kiosk-1", "h-new") })
	write(t, s, func(tx *Tx) error { return tx.Devices().RequestRotation("kiosk-1", time.Hour) })
	write(t, s, func(tx *Tx) error { return tx.Devices().SendRotation("kiosk-1", "h-sent") })
	write(t, s, func(tx *Tx) error {
		return tx.Identities().Create(Identity{Name: "ci", Role: "viewer"}, Token{ID: "t1", Hash: "h-ci-1"})
	})
	write(t, s, func(tx *Tx) error { return tx.Identities().AddToken(Token{ID: "t2", Identity: "ci", Hash: "h-ci-2"}) })
	addIdentity(t, s, "root", "admin", "", "t0") // so that ci may go

	before := time.Now().Truncate(time.Second)
	write(t, s, func(tx *Tx) error { return tx.Devices().Delete("kiosk-1") })
	write(t, s, func(tx *Tx) error { return tx.Identities().DeleteToken("ci", "t1") })
	for hash, owner := range map[string]string{"h-old": "kiosk-1", "h-new": "kiosk-1", "h-sent": "kiosk-1", "h-ci-1": "ci"} {
		r, err := s.RevokedToken(ctx, hash)
		require.NoError(t, err, hash)
		assert.Equal(t, owner, r.Owner, hash)
		assert.WithinRange(t, r.RevokedAt, before, time.Now(), hash)
	}
	r, err := s.RevokedToken(ctx, "h-old")
	require.NoError(t, err)
	assert.Equal(t, RevokedDeviceToken, r.Kind)
	_, err = s.RevokedToken(ctx, "h-ci-2")
	assert.ErrorIs(t, err, ErrNotFound, "a token not revoked")

	write(t, s, func(tx *Tx) error { _, err := tx.Identities().Delete("ci"); return err })
	r, err = s.RevokedToken(ctx, "h-ci-2")
	require.NoError(t, err)
	assert.Equal(t, RevokedIdentityToken, r.Kind)
	_, err = s.RevokedToken(ctx, "h-never")
	assert.ErrorIs(t, err, ErrNotFound)
}
