package store

import "github.com/edgeaip/edgeaip/server/internal/store/internal/rollouts"

// The modules rollouts put on devices, rollouts, their revisions and
// their devices' states: see package rollouts.
type (
	Module          = rollouts.Module
	Rollout         = rollouts.Rollout
	RolloutRevision = rollouts.Revision
	RolloutDevice   = rollouts.Device
	// RolloutLeader is who leads a rollout in a cluster.
	RolloutLeader = rollouts.Leader
	// RolloutStateCount is how many devices of a rollout are in a state.
	RolloutStateCount = rollouts.StateCount
	// RolloutWrites are a write's changes to modules and rollouts.
	// Reached by [Tx.Rollouts]; they belong to the write's transaction.
	RolloutWrites = rollouts.Writes
	// RolloutReads are the reads of modules and rollouts. Reached by
	// [Store.Rollouts].
	RolloutReads = rollouts.Reads
)

// ErrRolloutMoved: a rollout that changed since it was read.
var ErrRolloutMoved = rollouts.ErrMoved

// Rollouts are this write's changes to what [RolloutWrites] keep.
func (t *Tx) Rollouts() RolloutWrites { return rollouts.WritesIn(partTx{t}) }

// Rollouts are the reads of what [RolloutReads] keep.
func (s *Store) Rollouts() RolloutReads { return rollouts.ReadsOf(partReader{s}) }

// Agent releases, kept beside the modules: see package rollouts.
type (
	// Release is an agent release as kept, with when and by whom it was
	// published.
	Release = rollouts.Release
	// ReleaseConflictError names the release kept under the version, OS
	// and architecture of one refused.
	ReleaseConflictError = rollouts.ReleaseConflictError
)

// ErrReleaseConflict: another release of the same version, OS and
// architecture is kept.
var ErrReleaseConflict = rollouts.ErrReleaseConflict

// ReleaseTool is the tool name of a release's binary among the modules.
const ReleaseTool = rollouts.ReleaseTool
