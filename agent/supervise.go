package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/edgeaip/edgeaip/agent/internal/selfupdate"
	"github.com/edgeaip/edgeaip/internal/dirlock"
)

// SupervisedEnv is the environment variable a supervisor sets for the
// agent it starts: that agent runs, rather than supervises.
const SupervisedEnv = selfupdate.SupervisedEnv

// Supervise runs an agent that updates itself (cfg has release keys): it
// starts the newest committed release in the data dir, or the flashed
// binary at self, as a child with args, watches a release's trial, and
// brings the previous agent back when a trial fails. It returns when ctx
// ends, once the child has stopped.
func Supervise(ctx context.Context, cfg Config, self string, args []string) error {
	dir := selfupdate.DirOf(cfg.DataDir)
	if err := os.MkdirAll(string(dir), 0o700); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	lock, err := dirlock.Acquire(string(dir), "supervisor.lock")
	if err != nil {
		return fmt.Errorf("agent: supervisor: %w", err)
	}
	defer lock.Release()
	self, err = filepath.Abs(self)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	cfg.SetDefaults()
	// The agent's grace, its outbox's flush, and a margin, before SIGKILL.
	grace := cfg.ShutdownGrace + flushTimeout + 5*time.Second
	s := selfupdate.Supervisor{Dir: dir, Flashed: self, Args: args, Keys: cfg.ReleaseKeys, StopGrace: grace,
		Log: cfg.Logger.With("part", "supervisor")}
	return s.Run(ctx)
}
