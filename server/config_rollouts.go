package server

import "github.com/edgeaip/edgeaip/server/internal/rollouts"

// RolloutsConfig tunes the rollouts: how many devices change at once,
// and how often each rollout is reconciled though no event asked for it.
type RolloutsConfig = rollouts.Options

// The rollouts' defaults.
const (
	DefaultRolloutConcurrency = rollouts.DefaultConcurrency
	DefaultRolloutSweep       = rollouts.DefaultSweep
)
