package selfupdate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
	"github.com/edgeaip/edgeaip/internal/atomicfile"
	"github.com/edgeaip/edgeaip/protocol"
)

// keepCommitted is how many committed releases stay installed: the one
// that runs and the one before it, which a revert starts without a
// download.
const keepCommitted = 2

// State is what DATA/releases/state.json holds.
type State struct {
	// Committed are the committed releases, oldest first; the last runs.
	Committed []agentrelease.Release `json:"committed"`
	// Trial is the release on trial, if any.
	Trial *Trial `json:"trial,omitempty"`
	// Failed is the last trial that failed.
	Failed *protocol.TrialFailure `json:"failed,omitempty"`
}

// Trial is a release applied and not yet committed.
type Trial struct {
	Release agentrelease.Release `json:"release"`
	// Rollout and Revision applied it.
	Rollout  string `json:"rollout,omitempty"`
	Revision int    `json:"revision,omitempty"`
	// Bound is how long it has, from its start, to be committed.
	Bound time.Duration `json:"bound"`
	// Started is set, durably, before the supervisor starts it: a trial
	// found started at the supervisor's own start was cut by a crash or
	// a power loss, and fails.
	Started bool `json:"started,omitempty"`
	// Registered is set by the release once it registered, so that a
	// trial that runs out of time says how far it got.
	Registered bool `json:"registered,omitempty"`
}

// Dir is a device's DATA/releases.
type Dir string

func (d Dir) statePath() string          { return filepath.Join(string(d), "state.json") }
func (d Dir) binary(sha string) string   { return filepath.Join(string(d), "bin", sha) }
func (d Dir) incoming(sha string) string { return filepath.Join(string(d), "incoming", sha+".zst") }

// Load reads the state; none yet is the zero State.
func (d Dir) Load() (State, error) {
	var s State
	b, err := os.ReadFile(d.statePath())
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("agent releases: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("agent releases: %s: %w", d.statePath(), err)
	}
	return s, nil
}

// Save replaces the state, durably.
func (d Dir) Save(s State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("agent releases: %w", err)
	}
	if err := atomicfile.Write(d.statePath(), b); err != nil {
		return fmt.Errorf("agent releases: %w", err)
	}
	return nil
}

// fail ends s's trial as failed for reason, and removes its binary.
func (d Dir) fail(s State, reason string) (State, error) {
	t := s.Trial
	s.Trial = nil
	s.Failed = &protocol.TrialFailure{Version: t.Release.Version, SHA256: t.Release.SHA256, Reason: reason, At: time.Now().UTC(),
		Rollout: t.Rollout, Revision: t.Revision}
	if err := d.Save(s); err != nil {
		return s, err
	}
	d.removeUnused(s)
	return s, nil
}

// commit makes the release on trial the newest committed one, and
// removes the binaries no longer kept.
func (d Dir) commit(s State) (State, error) {
	s.Committed = append(s.Committed, s.Trial.Release)
	if n := len(s.Committed); n > keepCommitted {
		s.Committed = s.Committed[n-keepCommitted:]
	}
	s.Trial = nil
	if err := d.Save(s); err != nil {
		return s, err
	}
	d.removeUnused(s)
	return s, nil
}

// removeUnused removes the installed binaries that s does not name, and
// every download: one release changes at a time (a device is in one
// rollout of the agent), so a download left at a commit, a failure or a
// revert was abandoned. Failing that only leaves disk used.
func (d Dir) removeUnused(s State) {
	os.RemoveAll(filepath.Join(string(d), "incoming"))
	keep := map[string]bool{}
	for _, r := range s.Committed {
		keep[r.SHA256] = true
	}
	if s.Trial != nil {
		keep[s.Trial.Release.SHA256] = true
	}
	entries, _ := os.ReadDir(filepath.Join(string(d), "bin"))
	for _, e := range entries {
		if !keep[e.Name()] {
			os.Remove(filepath.Join(string(d), "bin", e.Name()))
		}
	}
}

// report is what the device reports of the agent that runs: the release
// whose digest the supervisor gave it (none: the flashed binary).
func (s State) report(running string) protocol.AgentUpdateReport {
	r := protocol.AgentUpdateReport{Running: running, Failed: s.Failed}
	r.Trial = s.Trial != nil && s.Trial.Release.SHA256 == running && running != ""
	return r
}
