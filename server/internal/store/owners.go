package store

import (
	"context"
	"fmt"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// Adopt makes to the owner of every session from left
// unfinished, and returns their ids. It is one UPDATE conditional on the
// owner being from still, so that of two nodes adopting the same dead
// node's sessions at once only one gets each (on PostgreSQL the second
// UPDATE waits for the first and then matches nothing), and from, if it
// runs on, is fenced off by SessionWrites.Fence and SessionWrites.End.
func (w SessionWrites) Adopt(from, to Owner) ([]string, error) {
	var ids []string
	err := w.t.returning(func(r rowScanner) error {
		var id string
		err := r.Scan(&id)
		ids = append(ids, id)
		return err
	}, `UPDATE sessions SET owner_node = ?, owner_epoch = ?
		 WHERE owner_node = ? AND owner_epoch = ? AND state IN `+unfinished+` RETURNING id`,
		to.Node, to.Epoch, from.Node, from.Epoch)
	if err != nil {
		return nil, fmt.Errorf("store: adopt the sessions of %s: %w", from, err)
	}
	return ids, nil
}

// Fence fails with ErrAdopted unless o still owns session id, and
// keeps it o's until the transaction ends: the write's row lock makes an
// adoption that comes meanwhile wait for this transaction, and then see
// what it wrote (a command it recorded, say). Written first in a
// transaction that records a command for a session another node could
// adopt.
func (w SessionWrites) Fence(id string, o Owner) error {
	fenced, err := w.t.changesRow(`UPDATE sessions SET owner_epoch = owner_epoch WHERE id = ? AND owner_node = ? AND owner_epoch = ?`,
		id, o.Node, o.Epoch)
	if err != nil {
		return fmt.Errorf("store: fence session %q for %s: %w", id, o, err)
	}
	if !fenced {
		return fmt.Errorf("store: session %q is no longer run by %s: %w", id, o, ErrAdopted)
	}
	return nil
}

// UnfinishedOwners lists the owners of the sessions not yet ended.
func (r SessionReads) UnfinishedOwners(ctx context.Context) ([]Owner, error) {
	rows, err := r.s.readRows(ctx, `SELECT DISTINCT owner_node, owner_epoch FROM sessions WHERE state IN `+unfinished)
	if err != nil {
		return nil, fmt.Errorf("store: owners of unfinished sessions: %w", err)
	}
	out, err := sqlrow.Collect(rows, scanOwner, []Owner(nil))
	if err != nil {
		return nil, fmt.Errorf("store: owners of unfinished sessions: %w", err)
	}
	return out, nil
}

func scanOwner(r rowScanner) (Owner, error) {
	var o Owner
	err := r.Scan(&o.Node, &o.Epoch)
	return o, err
}
