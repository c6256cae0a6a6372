package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ownedSession records a running plan session of owner, with a pending
// command for its first step.
func ownedSession(t *testing.T, s *Store, id string, owner Owner) {
	t.Helper()
	write(t, s, func(tx *Tx) error {
		if err := tx.Sessions().Insert(Session{ID: id, DeviceID: "kiosk-1", RequesterKind: "operator", Kind: "plan", State: "running",
			CreatedAt: time.Now(), Owner: owner}); err != nil {
			return err
		}
		return tx.Commands().Insert(Command{ResponseID: "r-" + id, DeviceID: "kiosk-1", SessionID: id, Actor: "operator",
			Actions: twoActions(), Timeout: 90 * time.Second, WaitForDevice: true})
	})
}

// A single node that starts again on a store the nodes of a cluster use
// too fails only its own unfinished sessions (they belong to no node)
// and their commands: the nodes' are theirs, or the cluster's to adopt.
func TestFailInterruptedLeavesTheSessionsOfNodesAlone(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	ownedSession(t, s, "a1", Owner{"a", 1})
	ownedSession(t, s, "b1", Owner{"b", 7})
	ownedSession(t, s, "single", Owner{})

	var ns, nc int
	write(t, s, func(tx *Tx) (err error) { ns, nc, err = tx.Sessions().FailInterrupted("server restarted"); return err })
	assert.Equal(t, 1, ns)
	assert.Equal(t, 1, nc)
	for id, want := range map[string]string{"a1": "running", "b1": "running", "single": "failed"} {
		ses, err := s.Sessions().Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, want, ses.State, id)
		c, err := s.Commands().Get(ctx, "r-"+id)
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"failed": CommandFailed, "running": CommandPending}[want], c.Status, id)
	}
	c, err := s.Commands().Get(ctx, "r-b1")
	require.NoError(t, err)
	assert.Equal(t, 90*time.Second, c.Timeout, "kept for the node that sends it again")
	assert.True(t, c.WaitForDevice)
}

// Adoption moves a dead owner's unfinished sessions to the adopter once;
// the old owner is then fenced off: its commands and its end are refused,
// and the adopter's end stands.
func TestAdoptionIsOnceAndFencesTheOldOwner(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	dead, b, c := Owner{"a", 1}, Owner{"b", 2}, Owner{"c", 3}
	ownedSession(t, s, "s1", dead)
	ownedSession(t, s, "s2", dead)
	ownedSession(t, s, "other", c)
	owners, err := s.Sessions().UnfinishedOwners(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []Owner{dead, c}, owners)

	var ids []string
	write(t, s, func(tx *Tx) (err error) { ids, err = tx.Sessions().Adopt(dead, b); return err })
	assert.ElementsMatch(t, []string{"s1", "s2"}, ids)
	write(t, s, func(tx *Tx) (err error) { ids, err = tx.Sessions().Adopt(dead, c); return err })
	assert.Empty(t, ids, "adopted once")
	ses, err := s.Sessions().Get(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, b, ses.Owner)

	require.ErrorIs(t, s.Write(ctx, func(tx *Tx) error { return tx.Sessions().Fence("s1", dead) }), ErrAdopted)
	write(t, s, func(tx *Tx) error { return tx.Sessions().Fence("s1", b) })
	end := Session{ID: "s1", DeviceID: "kiosk-1", RequesterKind: "operator", Kind: "plan", State: "failed", Error: "stale", Owner: dead}
	write(t, s, func(tx *Tx) error { return tx.Sessions().End(end) })
	ses, err = s.Sessions().Get(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, "running", ses.State, "the old owner's end is not recorded")
	end.Owner, end.State, end.Error = b, "completed", ""
	write(t, s, func(tx *Tx) error { return tx.Sessions().End(end) })
	ses, err = s.Sessions().Get(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, "completed", ses.State)
}

// Two nodes, each with its own store on one PostgreSQL database, adopt
// the same dead node's sessions at once, many times over: each session
// goes to exactly one of them.
func TestTwoNodesAdoptingAtOnceNeverBothGetASession(t *testing.T) {
	if !pgtest.StoreOnPostgres(t) {
		t.Skip("two nodes share a store on PostgreSQL alone; EDGEAIP_TEST_STORE=postgres runs this")
	}
	url := pgtest.Shared(t).NewDatabase(t)
	s1, _ := openTestAt(t, url)
	s2, _ := openTestAt(t, url)
	ctx := context.Background()
	for round := range 20 {
		dead := Owner{"dead", int64(round)}
		for i := range 5 {
			ownedSession(t, s1, fmtID(round, i), dead)
		}
		var wg sync.WaitGroup
		got := make([][]string, 2)
		for i, s := range []*Store{s1, s2} {
			wg.Go(func() {
				require.NoError(t, s.Write(ctx, func(tx *Tx) (err error) {
					got[i], err = tx.Sessions().Adopt(dead, Owner{fmtID(round, i), 1})
					return err
				}))
			})
		}
		wg.Wait()
		assert.Len(t, append(got[0], got[1]...), 5, "round %d: %v", round, got)
	}
}

func fmtID(round, i int) string { return fmt.Sprintf("%d-%d", round, i) }
