package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testRelease is a release of body, as published by alice.
func testRelease(version, arch string, body []byte) Release {
	sum := sha256.Sum256(body)
	return Release{Release: agentrelease.Release{Version: version, OS: "linux", Arch: arch, SHA256: hex.EncodeToString(sum[:]),
		Size: int64(len(body)), KeyID: "key1", Signature: []byte("sig-" + version + arch)}, By: "alice"}
}

// putRelease keeps r with body in its own write.
func putRelease(t *testing.T, s *Store, r Release, body []byte) (created bool, err error) {
	t.Helper()
	err = s.Write(context.Background(), func(tx *Tx) (err error) {
		created, err = tx.Rollouts().PutRelease(r, body)
		return err
	})
	return created, err
}

func TestReleasesAreKeptWithTheirBinariesAcrossARestartAndListedNewestFirst(t *testing.T) {
	s, path := openTest(t)
	ctx := context.Background()
	arm, amd := []byte("\x7fELF arm64 agent"), []byte("\x7fELF amd64 agent")
	first, second := testRelease("1.2.3", "arm64", arm), testRelease("1.2.3", "amd64", amd)
	for _, p := range []struct {
		r    Release
		body []byte
	}{{first, arm}, {second, amd}} {
		created, err := putRelease(t, s, p.r, p.body)
		require.NoError(t, err)
		assert.True(t, created)
	}
	created, err := putRelease(t, s, first, arm)
	require.NoError(t, err, "the same release again")
	assert.False(t, created, "the same release again changes nothing")

	require.NoError(t, s.Close())
	s, _ = openTestAt(t, path)
	got, err := s.Rollouts().Releases(ctx)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, second.Release, got[0].Release, "newest first")
	assert.Equal(t, first.Release, got[1].Release)
	assert.Equal(t, "alice", got[1].By)
	assert.False(t, got[1].CreatedAt.IsZero())

	one, err := s.Rollouts().Release(ctx, "1.2.3", "linux", "arm64")
	require.NoError(t, err)
	assert.Equal(t, first.Release, one.Release)
	m, err := s.Rollouts().Module(ctx, one.SHA256)
	require.NoError(t, err)
	assert.Equal(t, arm, m.Body, "the binary is kept among the modules, by its digest")
	assert.Equal(t, ReleaseTool, m.Tool)
	_, err = s.Rollouts().Release(ctx, "1.2.4", "linux", "arm64")
	assert.ErrorIs(t, err, ErrNotFound)
}

func TestAnotherBinaryOrSignatureUnderAKeptReleasesVersionAndPlatformIsAConflictThatKeepsNothing(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	kept := testRelease("2.0.0", "arm64", []byte("first build"))
	_, err := putRelease(t, s, kept, []byte("first build"))
	require.NoError(t, err)

	other := testRelease("2.0.0", "arm64", []byte("second build"))
	resigned := kept
	resigned.KeyID, resigned.Signature = "key2", []byte("another signature")
	for name, p := range map[string]struct {
		r    Release
		body []byte
	}{"another binary": {other, []byte("second build")}, "another signature": {resigned, []byte("first build")}} {
		_, err = putRelease(t, s, p.r, p.body)
		require.ErrorIs(t, err, ErrReleaseConflict, name)
		var conflict *ReleaseConflictError
		require.ErrorAs(t, err, &conflict, name)
		assert.Equal(t, kept.Release, conflict.Kept.Release, name)
		assert.Contains(t, err.Error(), kept.SHA256, "%s: the error names the digest kept", name)
	}
	_, err = s.Rollouts().Module(ctx, other.SHA256)
	assert.ErrorIs(t, err, ErrNotFound, "the refused release's binary is not kept")
	r, err := s.Rollouts().Release(ctx, "2.0.0", "linux", "arm64")
	require.NoError(t, err)
	assert.Equal(t, kept.Release, r.Release)
}
