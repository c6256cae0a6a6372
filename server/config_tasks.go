package server

import "github.com/edgeaip/edgeaip/server/internal/tasks"

// SessionConfig tunes the session manager: limits, result TTL, device
// grace (tasks.SessionConfig).
type SessionConfig = tasks.SessionConfig

// DefaultPreparationBound is SessionConfig.PreparationBound's default.
const DefaultPreparationBound = tasks.DefaultPreparationBound

// Limits bound what one request may ask of devices: admission refuses a
// command, plan or fleet past them, or past the wire's own limits
// (tasks.Limits).
type Limits = tasks.Limits
