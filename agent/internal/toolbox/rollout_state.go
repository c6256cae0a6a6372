package toolbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/internal/atomicfile"
	"github.com/edgeaip/edgeaip/protocol"
)

// rolloutState is what a device keeps of one rollout, as
// DATA/rollouts/NAME.json: the revision applied, the one it replaced,
// whose modules stay kept so that a rollback needs no download, and the
// tools deployed by hand, with force, in place of the rollout's.
type rolloutState struct {
	Rollout   string            `json:"rollout"`
	Revision  int               `json:"revision"`
	Tools     map[string]string `json:"tools"`
	Previous  *revisionTools    `json:"previous,omitempty"`
	Overrides map[string]string `json:"overrides"`
}

// revisionTools is a revision that was applied: its number and its tools.
type revisionTools struct {
	Revision int               `json:"revision"`
	Tools    map[string]string `json:"tools"`
}

// loaded is what the rollout's namespace holds: its tools, with the
// overrides in place of theirs.
func (s rolloutState) loaded() map[string]string {
	out := maps.Clone(s.Tools)
	maps.Copy(out, s.Overrides)
	return out
}

// report is the state as the device registers it.
func (s rolloutState) report() protocol.RolloutReport {
	r := protocol.RolloutReport{Revision: s.Revision, Tools: maps.Clone(s.Tools), Overrides: maps.Clone(s.Overrides)}
	if r.Overrides == nil {
		r.Overrides = map[string]string{}
	}
	if s.Previous != nil {
		r.PreviousRevision = s.Previous.Revision
	}
	return r
}

// modules adds the digests the state refers to, whose modules must stay
// kept, to inUse.
func (s rolloutState) modules(inUse map[string]bool) {
	sets := []map[string]string{s.Tools, s.Overrides}
	if s.Previous != nil {
		sets = append(sets, s.Previous.Tools)
	}
	for _, set := range sets {
		for _, sha := range set {
			inUse[sha] = true
		}
	}
}

// rolloutsDir holds the state of each rollout, one file per rollout.
func (b *Toolbox) rolloutsDir() string { return filepath.Join(b.cfg.DataDir, "rollouts") }

func (b *Toolbox) rolloutFile(name string) string {
	return filepath.Join(b.rolloutsDir(), name+".json")
}

// readRollouts reads the state of every rollout on the device; a file
// that cannot be read is refused.
func (b *Toolbox) readRollouts() ([]rolloutState, error) {
	paths, err := filepath.Glob(filepath.Join(b.rolloutsDir(), "*.json"))
	if err != nil {
		return nil, fmt.Errorf("rollouts: %w", err)
	}
	slices.Sort(paths)
	var states []rolloutState
	for _, p := range paths {
		s, err := readRollout(p)
		if err != nil {
			b.refuse(Refusal{Path: p, Error: "rollout not loaded: " + err.Error()})
			continue
		}
		states = append(states, s)
	}
	return states, nil
}

func readRollout(path string) (rolloutState, error) {
	var s rolloutState
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	if want := strings.TrimSuffix(filepath.Base(path), ".json"); s.Rollout != want {
		return s, fmt.Errorf("%s: the file is rollout %q's, not %q's", path, s.Rollout, want)
	}
	return s, nil
}

// saveRollout writes s whole, then makes it the rollout's state.
func (b *Toolbox) saveRollout(s rolloutState) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("rollout %q: %w", s.Rollout, err)
	}
	if err := atomicfile.Write(b.rolloutFile(s.Rollout), data); err != nil {
		return fmt.Errorf("rollout %q: %w", s.Rollout, err)
	}
	b.remember(s)
	return nil
}

// remember makes s the state of its rollout.
func (b *Toolbox) remember(s rolloutState) {
	b.rolloutsMu.Lock()
	defer b.rolloutsMu.Unlock()
	b.rollouts[s.Rollout] = s
}

// dropRollout removes the state of rollout name.
func (b *Toolbox) dropRollout(name string) error {
	if err := os.Remove(b.rolloutFile(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rollout %q: %w", name, err)
	}
	if err := atomicfile.SyncDir(b.rolloutsDir()); err != nil {
		return fmt.Errorf("rollout %q: %w", name, err)
	}
	b.rolloutsMu.Lock()
	defer b.rolloutsMu.Unlock()
	delete(b.rollouts, name)
	return nil
}

// rollout returns the state of rollout name, if the device has it.
func (b *Toolbox) rollout(name string) (rolloutState, bool) {
	b.rolloutsMu.Lock()
	defer b.rolloutsMu.Unlock()
	s, ok := b.rollouts[name]
	return s, ok
}

// rolloutOwning returns the rollout that put tool on the device, if one
// did.
func (b *Toolbox) rolloutOwning(tool string) (rolloutState, bool) {
	b.rolloutsMu.Lock()
	defer b.rolloutsMu.Unlock()
	for _, s := range b.rollouts {
		if _, ok := s.Tools[tool]; ok {
			return s, true
		}
	}
	return rolloutState{}, false
}

// Rollouts reports the device's rollouts and the digests of the modules
// it keeps, sorted, for registration.
func (b *Toolbox) Rollouts() (map[string]protocol.RolloutReport, []string) {
	modules, err := b.modules.list()
	if err != nil {
		b.log.Warn("kept modules not reported", "err", err)
	}
	b.rolloutsMu.Lock()
	defer b.rolloutsMu.Unlock()
	reports := make(map[string]protocol.RolloutReport, len(b.rollouts))
	for name, s := range b.rollouts {
		reports[name] = s.report()
	}
	return reports, modules
}

// collectModules removes the kept modules that no rollout's current or
// previous revision nor override refers to, and that were not staged in
// the last stagedFor: a module staged for a revision not yet applied
// stays. Callers hold b.deploying.
func (b *Toolbox) collectModules() {
	inUse := map[string]bool{}
	b.rolloutsMu.Lock()
	for _, s := range b.rollouts {
		s.modules(inUse)
	}
	b.rolloutsMu.Unlock()
	removed, err := b.modules.collect(inUse, time.Now().Add(-stagedFor))
	if err != nil {
		b.log.Warn("kept modules not collected", "err", err)
	}
	if len(removed) > 0 {
		b.log.Info("kept modules removed: no rollout refers to them", "sha256", removed)
	}
}
