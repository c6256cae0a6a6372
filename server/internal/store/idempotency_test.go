package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func keyedSession(id, identity, key string) Session {
	return Session{ID: id, DeviceID: "d1", RequesterKind: "operator", Kind: "plan", State: "created", CreatedAt: time.Now(),
		Key: &IdempotencyKey{Identity: identity, Key: key, Fingerprint: "fp-" + id, Response: json.RawMessage(`{"session_id":"` + id + `"}`)}}
}

func TestAnIdempotencyKeyIsRecordedWithItsSessionOncePerIdentityAndOutlivesARestart(t *testing.T) {
	s, path := openTest(t)
	ctx := context.Background()
	write(t, s, func(tx *Tx) error { return tx.Sessions().Insert(keyedSession("s1", "operator", "k1")) })

	err := s.Write(ctx, func(tx *Tx) error { return tx.Sessions().Insert(keyedSession("s2", "operator", "k1")) })
	require.ErrorIs(t, err, ErrKeyTaken)
	_, err = s.Sessions().Get(ctx, "s2")
	assert.ErrorIs(t, err, ErrNotFound, "a session whose key is taken is not recorded")
	write(t, s, func(tx *Tx) error { return tx.Sessions().Insert(keyedSession("s3", "someone-else", "k1")) })

	require.NoError(t, s.Close())
	s, err = Open(ctx, path, Options{})
	require.NoError(t, err)
	defer s.Close()
	k, err := s.IdempotencyKeys().Get(ctx, "operator", "k1")
	require.NoError(t, err)
	assert.Equal(t, "s1", k.SessionID)
	assert.Equal(t, "fp-s1", k.Fingerprint)
	assert.JSONEq(t, `{"session_id":"s1"}`, string(k.Response))
	assert.WithinDuration(t, time.Now(), k.CreatedAt, time.Minute)
	k, err = s.IdempotencyKeys().Get(ctx, "someone-else", "k1")
	require.NoError(t, err)
	assert.Equal(t, "s3", k.SessionID, "each identity has its own keys")
	_, err = s.IdempotencyKeys().Get(ctx, "operator", "k2")
	assert.ErrorIs(t, err, ErrNotFound)

	var n int
	write(t, s, func(tx *Tx) (err error) {
		n, err = tx.IdempotencyKeys().DeleteBefore(time.Now().Add(-time.Hour))
		return err
	})
	assert.Zero(t, n, "younger keys are kept")
	write(t, s, func(tx *Tx) (err error) {
		n, err = tx.IdempotencyKeys().DeleteBefore(time.Now().Add(time.Second))
		return err
	})
	assert.Equal(t, 2, n)
	_, err = s.IdempotencyKeys().Get(ctx, "operator", "k1")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s.Sessions().Get(ctx, "s1")
	assert.NoError(t, err, "the session outlives its key")
}
