package store

import (
	"github.com/edgeaip/edgeaip/server/internal/store/internal/identities"
)

// Identity is an operator identity: a name, a role, a scope, and the
// tokens that act for it.
type Identity = identities.Identity

// Token is one of an identity's tokens. Only its hash is kept; its ID is
// public, for listings and the audit log.
type Token = identities.Token

// By names who asked for a task, a command or an audit entry: the
// operator identity and the token it used. Rows from before identities
// name no one.
type By = identities.By

// ErrLastAdmin: a change that would leave no unscoped admin with a live
// token, and so nobody to manage identities.
var ErrLastAdmin = identities.ErrLastAdmin

// IdentityWrites are a write's changes to identities, their tokens and
// their logins. Reached by [Tx.Identities]; they belong to the write's
// transaction.
type IdentityWrites = identities.Writes

// Identities are this write's changes to what [IdentityWrites] keep.
func (t *Tx) Identities() IdentityWrites { return identities.WritesIn(partTx{t}) }

// IdentityReads are the reads of identities, their tokens and their
// logins. Reached by [Store.Identities].
type IdentityReads = identities.Reads

// Identities are the reads of what [IdentityReads] keep.
func (s *Store) Identities() IdentityReads { return identities.ReadsOf(partReader{s}) }
