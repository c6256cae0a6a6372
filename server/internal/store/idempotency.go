package store

import "github.com/edgeaip/edgeaip/server/internal/store/internal/idempotency"

// The Idempotency-Keys of API requests: see package idempotency. A key is
// inserted with the session it started (SessionWrites.Insert).
type (
	// IdempotencyKey is a request's key as the session it started
	// records it.
	IdempotencyKey = idempotency.Key
	// IdempotencyKeyWrites are a write's changes to the keys. Reached by
	// [Tx.IdempotencyKeys]; they belong to the write's transaction.
	IdempotencyKeyWrites = idempotency.Writes
	// IdempotencyKeyReads are the reads of the keys. Reached by
	// [Store.IdempotencyKeys].
	IdempotencyKeyReads = idempotency.Reads
)

// ErrKeyTaken: an idempotency key that another request has already
// recorded.
var ErrKeyTaken = idempotency.ErrKeyTaken

// IdempotencyKeys are this write's changes to what [IdempotencyKeyWrites] keep.
func (t *Tx) IdempotencyKeys() IdempotencyKeyWrites { return idempotency.WritesIn(partTx{t}) }

// IdempotencyKeys are the reads of what [IdempotencyKeyReads] keep.
func (s *Store) IdempotencyKeys() IdempotencyKeyReads { return idempotency.ReadsOf(partReader{s}) }
