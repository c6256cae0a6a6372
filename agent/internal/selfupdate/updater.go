package selfupdate

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/protocol"
)

// ErrNotSupervised is what apply_release answers on an agent that was not
// started by a supervisor.
var ErrNotSupervised = errors.New("this agent does not update itself: give it a release key (updates.release_keys, or --release-key), and it starts releases and watches their trial")

// Updater is the running agent's side of its updates: the meta tools, and
// what the device reports at registration.
type Updater struct {
	dir  Dir
	keys []ed25519.PublicKey
	// running is the release this agent is ("flashed": the flashed
	// binary; empty: not started by a supervisor).
	running string
	restart func()
	// changed makes the device register again, with what Report says
	// now: the release committed.
	changed func()
	log     *slog.Logger
	// mu lets one change happen at a time.
	mu sync.Mutex
}

// NewUpdater returns the updater of an agent whose data dir is dataDir,
// that trusts keys, and that runs as supervised says (SupervisedEnv's
// value; empty: unsupervised). restart ends the agent for its supervisor
// to start the agent the state now names; changed makes the device
// register again.
func NewUpdater(dataDir string, keys []ed25519.PublicKey, supervised string, restart, changed func(), log *slog.Logger) *Updater {
	return &Updater{dir: DirOf(dataDir), keys: keys, running: supervised, restart: restart, changed: changed, log: log}
}

// DirOf is the releases' dir in a data dir.
func DirOf(dataDir string) Dir { return Dir(dataDir + "/releases") }

// Report is what the device reports at registration.
func (u *Updater) Report() protocol.AgentUpdateReport {
	st, err := u.dir.Load()
	if err != nil {
		u.log.Warn("agent release state not read", "err", err)
	}
	running := u.running
	if running == flashed {
		running = ""
	}
	return st.report(running)
}

// Registered marks the release on trial, if this agent is it, as
// registered: a trial that then runs out of time says so.
func (u *Updater) Registered() {
	u.mu.Lock()
	defer u.mu.Unlock()
	st, err := u.dir.Load()
	if err != nil || st.Trial == nil || st.Trial.Release.SHA256 != u.running || st.Trial.Registered {
		return
	}
	st.Trial.Registered = true
	if err := u.dir.Save(st); err != nil {
		u.log.Warn("trial's registration not recorded", "err", err)
	}
}

// MetaTools are stage_release, apply_release, end_trial and
// revert_release.
func (u *Updater) MetaTools() []computer.Tool {
	return []computer.Tool{
		metaTool{info: computer.MetaToolInfo(protocol.StageReleaseName, "Stage agent release",
			"Takes one chunk of a signed agent release, resuming where the device's copy ends; installs it once whole.", protocol.StageReleaseSchema), call: u.stage},
		metaTool{info: computer.MetaToolInfo(protocol.ApplyReleaseName, "Apply agent release",
			"Starts an installed agent release on trial: the agent restarts into it, and the previous agent comes back unless the release is committed within its bound.", protocol.ApplyReleaseSchema), call: u.apply},
		metaTool{info: computer.MetaToolInfo(protocol.EndTrialName, "End agent trial",
			"Commits the agent release on trial, or rejects it: the previous agent comes back.", protocol.EndTrialSchema), call: u.endTrial},
		metaTool{info: computer.MetaToolInfo(protocol.RevertReleaseName, "Revert agent release",
			"Takes back the agent release that runs, when the rollout that brought it is rolled back: the agent it replaced comes back.", protocol.RevertReleaseSchema), call: u.revert},
	}
}

// metaTool is a meta tool of the updater.
type metaTool struct {
	info protocol.MCPToolInfo
	call func(params map[string]any) (map[string]any, error)
}

// Info describes the tool.
func (t metaTool) Info() protocol.MCPToolInfo { return t.info }

// Call runs it.
func (t metaTool) Call(_ context.Context, params map[string]any) protocol.Result {
	out, err := t.call(params)
	if err != nil {
		return computer.Failure(fmt.Errorf("%s: %w", t.info.ToolName, err))
	}
	return protocol.Result{Status: protocol.ResultSuccess, Result: out}
}

func (u *Updater) stage(params map[string]any) (map[string]any, error) {
	c, err := protocol.ReleaseChunkFrom(params)
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	s, err := u.dir.stage(c, u.keys)
	if err != nil {
		u.log.Error("agent release refused", "version", c.Release.Version, "err", err)
		return nil, err
	}
	if c.Data == nil && s.Have > 0 && !s.Installed {
		u.log.Info("agent release download resumed", "version", c.Release.Version, "have", s.Have, "of", c.Total)
	}
	if s.Installed && c.Data != nil {
		u.log.Info("agent release installed", "version", c.Release.Version, "sha256", c.Release.SHA256[:12])
	}
	return map[string]any{"have": s.Have, "installed": s.Installed}, nil
}

func (u *Updater) apply(params map[string]any) (map[string]any, error) {
	a, err := protocol.ApplyReleaseFrom(params)
	if err != nil {
		return nil, err
	}
	if u.running == "" {
		return nil, ErrNotSupervised
	}
	if a.Release.SHA256 == u.running {
		return map[string]any{"version": a.Release.Version, "already": true}, nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := accept(a.Release, u.keys); err != nil {
		return nil, err
	}
	if err := u.dir.installed(a.Release); err != nil {
		return nil, err
	}
	st, err := u.dir.Load()
	if err != nil {
		return nil, err
	}
	if st.Trial != nil && st.Trial.Release.SHA256 == u.running {
		return nil, fmt.Errorf("release %s is on trial: end its trial first", st.Trial.Release.Version)
	}
	st.Trial = &Trial{Release: a.Release, Rollout: a.Rollout, Revision: a.Revision, Bound: a.Trial}
	if err := u.dir.Save(st); err != nil {
		return nil, err
	}
	u.log.Info("agent release applied: restarting into it on trial", "version", a.Release.Version, "bound", a.Trial)
	u.restart()
	return map[string]any{"version": a.Release.Version, "trial_seconds": int64(a.Trial.Seconds())}, nil
}

func (u *Updater) endTrial(params map[string]any) (map[string]any, error) {
	sha, _ := params["sha256"].(string)
	commit, ok := params["commit"].(bool)
	if !ok {
		return nil, errors.New(`parameter "commit": missing or not a boolean`)
	}
	reason, _ := params["reason"].(string)
	u.mu.Lock()
	defer u.mu.Unlock()
	st, err := u.dir.Load()
	if err != nil {
		return nil, err
	}
	if st.Trial == nil || st.Trial.Release.SHA256 != sha {
		if n := len(st.Committed); commit && n > 0 && st.Committed[n-1].SHA256 == sha {
			return map[string]any{"committed": true, "already": true}, nil
		}
		return nil, fmt.Errorf("release %.12s is not on trial here", sha)
	}
	if st.Trial.Release.SHA256 != u.running {
		return nil, fmt.Errorf("release %s is applied, but its trial has not started", st.Trial.Release.Version)
	}
	if commit {
		if _, err := u.dir.commit(st); err != nil {
			return nil, err
		}
		u.log.Info("agent release committed", "version", st.Trial.Release.Version)
		u.changed()
		return map[string]any{"committed": true}, nil
	}
	if _, err := u.dir.fail(st, "rejected: "+reason); err != nil {
		return nil, err
	}
	u.log.Warn("agent release rejected; the previous agent comes back", "version", st.Trial.Release.Version, "reason", reason)
	u.restart()
	return map[string]any{"committed": false}, nil
}

func (u *Updater) revert(params map[string]any) (map[string]any, error) {
	sha, _ := params["sha256"].(string)
	if sha == "" || sha != u.running {
		return map[string]any{"reverted": false}, nil // it does not run here: nothing to take back
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	st, err := u.dir.Load()
	if err != nil {
		return nil, err
	}
	if t := st.Trial; t != nil && t.Release.SHA256 == sha {
		if _, err := u.dir.fail(st, "rejected: its rollout was rolled back"); err != nil {
			return nil, err
		}
	} else {
		n := len(st.Committed)
		if n == 0 || st.Committed[n-1].SHA256 != sha {
			return nil, fmt.Errorf("release %.12s runs, but is not the newest committed", sha)
		}
		st.Committed = st.Committed[:n-1]
		if err := u.dir.Save(st); err != nil {
			return nil, err
		}
		u.dir.removeUnused(st)
	}
	u.log.Info("agent release reverted: restarting into the agent it replaced", "sha256", sha[:12])
	u.restart()
	return map[string]any{"reverted": true}, nil
}
