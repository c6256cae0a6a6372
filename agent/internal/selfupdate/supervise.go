package selfupdate

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
	"github.com/edgeaip/edgeaip/protocol"
)

// The environment a supervised agent is started with.
const (
	// SupervisedEnv is set, to the release's digest or to "flashed", for
	// every agent a supervisor starts: it runs the agent, not another
	// supervisor.
	SupervisedEnv = "AIP_AGENT_SUPERVISED"
	// flashed is SupervisedEnv's value for the flashed binary.
	flashed = "flashed"
)

// RestartExitCode is how an agent asks its supervisor to start the agent
// again, as the state now says: after apply_release, or after end_trial
// rejected the release on trial.
const RestartExitCode = 75

// DefaultStopGrace is how long an agent has to end after SIGTERM before
// it is killed, unless Supervisor.StopGrace says otherwise: a little over
// its default shutdown grace (10 s) and the flush of its outbox (5 s).
const DefaultStopGrace = 20 * time.Second

// Supervisor starts the agent as a child, and watches a release's trial.
type Supervisor struct {
	Dir Dir
	// Flashed is the flashed binary, and Args its arguments (os.Args[1:]),
	// which every release is started with too.
	Flashed string
	Args    []string
	Keys    []ed25519.PublicKey
	Log     *slog.Logger
	// StopGrace is how long an agent has to end after SIGTERM before it
	// is killed: above its shutdown grace and its outbox's flush.
	// Default DefaultStopGrace.
	StopGrace time.Duration

	// noTrials is set while the state cannot be written (save).
	noTrials bool
}

// Run starts agents until ctx ends, then stops the one that runs. It
// fails only when the flashed agent itself cannot be started: whatever
// befalls the data dir (a state file that does not read, a disk that
// takes no write), an agent runs.
func (s *Supervisor) Run(ctx context.Context) error {
	fails := 0
	for ctx.Err() == nil {
		st := s.load()
		if st.Trial != nil && !s.noTrials {
			s.runTrial(ctx, st)
			fails = 0
			continue
		}
		st.Trial = nil
		code, err := s.runCommitted(ctx, st)
		if err != nil {
			return err
		}
		if ctx.Err() != nil || (code == RestartExitCode && s.changed(st)) {
			s.noTrials, fails = false, 0 // the agent wrote the state that asked for it
			continue
		}
		fails++
		wait := min(time.Second<<min(fails, 5), 30*time.Second)
		s.Log.Warn("agent exited; starting it again", "status", code, "in", wait)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil
}

// changed reports whether the state is other than before: an agent that
// asks for a restart and changed nothing (a build that exits with
// RestartExitCode at start) is restarted with the backoff of one that
// failed.
func (s *Supervisor) changed(before State) bool {
	now, err := s.Dir.Load()
	if err != nil {
		return true
	}
	a, _ := json.Marshal(before)
	b, _ := json.Marshal(now)
	return !bytes.Equal(a, b)
}

// load reads the state. One that does not read is set aside, and the
// flashed agent runs: it registers, and the device can be updated again.
func (s *Supervisor) load() State {
	st, _ := s.read()
	return st
}

// read is load, saying whether the state read.
func (s *Supervisor) read() (State, bool) {
	st, err := s.Dir.Load()
	if err == nil {
		return st, true
	}
	aside := s.Dir.statePath() + ".unreadable"
	s.Log.Error("agent release state not read; set aside, and the flashed agent runs", "err", err, "aside", aside)
	if err := os.Rename(s.Dir.statePath(), aside); err != nil {
		s.Log.Error("agent release state not set aside", "err", err)
	}
	return State{}, false
}

// save writes st; a failure is logged, and no trial starts until an agent
// has written the state again (noTrials): a trial whose start or end
// cannot be recorded would be repeated, or never end.
func (s *Supervisor) save(st State) bool {
	if err := s.Dir.Save(st); err != nil {
		s.Log.Error("agent release state not written; no release starts on trial until it is", "err", err)
		s.noTrials = true
		return false
	}
	return true
}

// runCommitted runs the newest committed release that passes its check
// and starts, or the flashed binary, until it exits; a release that does
// not is reported as the last failure and dropped.
func (s *Supervisor) runCommitted(ctx context.Context, st State) (int, error) {
	for i := len(st.Committed) - 1; i >= 0; i-- {
		r := st.Committed[i]
		f, err := s.checked(r)
		var c *child
		if err == nil {
			if c, err = s.start(s.Dir.binary(r.SHA256), f, r.SHA256); err == nil {
				return c.wait(ctx, nil), nil
			}
		}
		s.Log.Error("committed release not started", "version", r.Version, "err", err)
		st.Committed = st.Committed[:i]
		st.Failed = failure(r, fmt.Sprintf("failed its check or its start: %v", err))
		s.save(st)
	}
	c, err := s.start(s.Flashed, nil, flashed)
	if err != nil {
		return 0, fmt.Errorf("starting the flashed agent %s: %w", s.Flashed, err)
	}
	return c.wait(ctx, nil), nil
}

// runTrial runs the release on trial until it is committed and exits, or
// until its trial fails; then the previous agent comes back.
func (s *Supervisor) runTrial(ctx context.Context, st State) {
	t := st.Trial
	log := s.Log.With("version", t.Release.Version, "sha256", t.Release.SHA256[:12])
	if t.Started {
		s.fail(log, st, "the device or its supervisor restarted during the trial")
		return
	}
	f, err := s.checked(t.Release)
	if err != nil {
		s.fail(log, st, fmt.Sprintf("failed its check before its start: %v", err))
		return
	}
	t.Started = true
	if !s.save(st) {
		f.Close()
		return
	}
	c, err := s.start(s.Dir.binary(t.Release.SHA256), f, t.Release.SHA256)
	if err != nil {
		s.fail(log, st, fmt.Sprintf("could not be started: %v", err))
		return
	}
	log.Info("release started on trial", "bound", t.Bound)
	deadline := time.NewTimer(t.Bound)
	defer deadline.Stop()
	code := c.wait(ctx, deadline.C)
	if ctx.Err() != nil && code >= 0 {
		return // stopped with the device: the trial fails at the next start
	}
	now, ok := s.read()
	if !ok { // what the trial came to is unknown: it did not pass
		c.stop()
		st.Trial = t
		s.fail(log, st, "its state could not be read at the end of its trial")
		return
	}
	if now.Trial == nil || now.Trial.Release.SHA256 != t.Release.SHA256 {
		if code < 0 { // committed, and runs on
			log.Info("release committed")
			s.watchCommitted(ctx, c)
		}
		return // committed, or rejected by end_trial, and exited
	}
	if code >= 0 {
		s.fail(log, now, fmt.Sprintf("exited with status %d before it was committed", code))
		return
	}
	c.stop()
	if now = s.load(); now.Trial == nil {
		return // committed at the last moment: it starts again as committed
	}
	reason := fmt.Sprintf("not committed within %s: it never registered", t.Bound)
	if now.Trial.Registered {
		reason = fmt.Sprintf("not committed within %s: it registered, but its health checks did not pass in time", t.Bound)
	}
	s.fail(log, now, reason)
}

// watchCommitted waits for a release committed while on trial to exit.
func (s *Supervisor) watchCommitted(ctx context.Context, c *child) {
	if code := c.wait(ctx, nil); code != RestartExitCode && ctx.Err() == nil {
		s.Log.Warn("agent exited; starting it again", "status", code)
	}
}

// fail records the trial's failure; the next round starts the previous
// agent.
func (s *Supervisor) fail(log *slog.Logger, st State, reason string) {
	log.Error("release trial failed; the previous agent comes back", "reason", reason)
	if _, err := s.Dir.fail(st, reason); err != nil {
		log.Error("agent release state not written; no release starts on trial until it is", "err", err)
		s.noTrials = true
	}
}

// checked checks a release before its start: its signature, its
// platform, and its installed binary, which it answers open, to start it
// from.
func (s *Supervisor) checked(r agentrelease.Release) (*os.File, error) {
	if err := accept(r, s.Keys); err != nil {
		return nil, err
	}
	return s.Dir.openInstalled(r)
}

// child is an agent the supervisor started.
type child struct {
	cmd   *exec.Cmd
	done  chan struct{} // closed once it exited, with code set
	code  int
	grace time.Duration // from SIGTERM to SIGKILL
}

// start starts the agent at path, or from checked, the file its check
// read, where it is given, as a child that dies with the supervisor.
func (s *Supervisor) start(path string, checked *os.File, release string) (*child, error) {
	cmd := exec.Command(path, s.Args...)
	cmd.Env = append(os.Environ(), SupervisedEnv+"="+release)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.SysProcAttr = childAttr()
	if checked != nil {
		defer checked.Close()
		execChecked(cmd, checked)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan struct{}), grace: cmp.Or(s.StopGrace, DefaultStopGrace)}
	go func() {
		c.code = exitCode(cmd.Wait())
		close(c.done)
	}()
	return c, nil
}

// wait waits for c to exit and answers its status; when ctx ends it
// stops c first. A tick of deadline answers -1, c still running.
func (c *child) wait(ctx context.Context, deadline <-chan time.Time) int {
	select {
	case <-c.done:
		return c.code
	case <-ctx.Done():
		c.stop()
		return c.code
	case <-deadline:
		return -1
	}
}

// stop ends c: SIGTERM, then SIGKILL after its grace.
func (c *child) stop() {
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(c.grace):
		c.cmd.Process.Kill()
		<-c.done
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ee.ExitCode() < 0 {
			return 128 // killed by a signal
		}
		return ee.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}

func failure(r agentrelease.Release, reason string) *protocol.TrialFailure {
	return &protocol.TrialFailure{Version: r.Version, SHA256: r.SHA256, Reason: reason, At: time.Now().UTC()}
}
