package rollouts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/klauspost/compress/zstd"
)

// skipped is a device the rollout passes over, and why: its agent has
// no release for the device's platform.
type skipped struct{ reason string }

func (s skipped) Error() string { return s.reason }

// updateAgent brings the device's agent to version, on trial: it sends
// the release for the device's platform over the device's link, applies
// it, and waits for the new agent to register. It answers the digest of
// the release on trial, which the health checks then decide on (empty:
// the device runs version already), also with an error that rejects it.
func (c *deviceChange) updateAgent(version string, rev int, trial time.Duration, revert string) (string, error) {
	if revert != "" {
		// Rolling back: the agent the device ran before the release
		// rolled back is kept on it, and may be version.
		if err := c.revertAgent(revert); err != nil {
			return "", err
		}
	}
	info := c.e.cfg.Inventory(c.ctx, c.device)
	if info == nil {
		return "", errors.New("the device has not registered yet")
	}
	rep, updates := protocol.AgentUpdateFromMetadata(info.CustomMetadata)
	if info.AgentVersion == version && !rep.Trial {
		return "", nil
	}
	kept, err := c.e.cfg.Store.Rollouts().Release(c.ctx, version, info.Platform, info.Arch)
	rel := kept.Release
	if errors.Is(err, store.ErrNotFound) {
		return "", skipped{fmt.Sprintf("no release of agent %s for %s/%s: publish one with aipctl agent publish", version, info.Platform, info.Arch)}
	}
	if err != nil {
		return "", fmt.Errorf("agent %s: %w", version, err)
	}
	if !updates {
		return "", fmt.Errorf("the device's agent %s does not update itself: start it with a release key (--release-key)", info.AgentVersion)
	}
	if f := rep.Failed; f != nil && f.SHA256 == rel.SHA256 && f.Rollout == c.rollout && f.Revision == rev {
		// Its trial failed while the change was away (the device was
		// offline past device_timeout, the server restarted): that is
		// the change's end, not a reason to try again.
		return "", fmt.Errorf("agent %s was rolled back on the device: %s", version, f.Reason)
	}
	if rep.Running != rel.SHA256 { // else on trial already: the change started again
		if err := c.sendRelease(rel); err != nil {
			return "", err
		}
		apply := protocol.Command{ToolName: protocol.ApplyReleaseName, ToolType: protocol.ToolAction,
			Parameters: protocol.ApplyReleaseParams(rel, c.rollout, rev, trial)}
		if _, err := c.command(apply); err != nil {
			return "", fmt.Errorf("apply agent %s: %w", version, err)
		}
		if err := c.e.agentStarted(c.ctx, c.device, rel, rep.Failed); err != nil {
			return "", err
		}
	}
	// A binary published under another version than it was built with
	// would never be at the rollout's version, however often applied.
	if info := c.e.cfg.Inventory(c.ctx, c.device); info != nil && info.AgentVersion != version {
		return rel.SHA256, fmt.Errorf("agent %s's binary (%.12s) says it is %s: publish the build stamped %s (make build VERSION=%s)",
			version, rel.SHA256, info.AgentVersion, version, version)
	}
	return rel.SHA256, nil
}

// revertAgent takes back the release of version that the device runs, if
// it runs it: the agent it replaced comes back, and registers.
func (c *deviceChange) revertAgent(version string) error {
	info := c.e.cfg.Inventory(c.ctx, c.device)
	if info == nil {
		return nil
	}
	rep, _ := protocol.AgentUpdateFromMetadata(info.CustomMetadata)
	kept, err := c.e.cfg.Store.Rollouts().Release(c.ctx, version, info.Platform, info.Arch)
	if errors.Is(err, store.ErrNotFound) || (err == nil && rep.Running != kept.SHA256) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("agent %s: %w", version, err)
	}
	cmd := protocol.Command{ToolName: protocol.RevertReleaseName, ToolType: protocol.ToolAction,
		Parameters: map[string]any{"sha256": kept.SHA256}}
	if _, err := c.command(cmd); err != nil {
		return fmt.Errorf("take back agent %s: %w", version, err)
	}
	return c.e.agentLeft(c.ctx, c.device, kept.Release)
}

// sendRelease sends rel's compressed stream in chunks, from where the
// device's copy ends: a download cut by a lost link, or by the server's
// restart, resumes.
func (c *deviceChange) sendRelease(rel agentrelease.Release) error {
	z, err := c.e.releaseStream(c.ctx, rel)
	if err != nil {
		return err
	}
	total := int64(len(z))
	st, err := c.stageChunk(protocol.ReleaseChunk{Release: rel, Total: total})
	// Each chunk moves the copy on; a device that answers otherwise
	// (another download of it ran meanwhile) is given a few rounds more.
	for rounds := 2*total/protocol.ReleaseChunkBytes + 4; err == nil && !st.Installed; rounds-- {
		if rounds == 0 || st.Have < 0 || st.Have >= total {
			return fmt.Errorf("agent %s: the device's copy stays at %d of %d bytes", rel.Version, st.Have, total)
		}
		end := min(st.Have+protocol.ReleaseChunkBytes, total)
		st, err = c.stageChunk(protocol.ReleaseChunk{Release: rel, Offset: st.Have, Total: total, Data: z[st.Have:end]})
	}
	return err
}

// stagedCopy is stage_release's answer.
type stagedCopy struct {
	Have      int64 `json:"have"`
	Installed bool  `json:"installed"`
}

func (c *deviceChange) stageChunk(chunk protocol.ReleaseChunk) (stagedCopy, error) {
	res, err := c.command(protocol.Command{ToolName: protocol.StageReleaseName, ToolType: protocol.ToolAction,
		Parameters: protocol.StageReleaseParams(chunk)})
	if err != nil {
		return stagedCopy{}, fmt.Errorf("stage agent %s: %w", chunk.Release.Version, err)
	}
	var st stagedCopy
	b, err := json.Marshal(res.Result)
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		return stagedCopy{}, fmt.Errorf("stage agent %s: the device's answer %v: %w", chunk.Release.Version, res.Result, err)
	}
	return st, nil
}

// agentStarted waits until device id registers running rel on trial, or
// reports that its trial failed (a failure other than before, the one it
// reported before the apply), or ctx ends.
func (e *Engine) agentStarted(ctx context.Context, id string, rel agentrelease.Release, before *protocol.TrialFailure) error {
	err := e.awaitReport(ctx, id, func(info *protocol.SystemInfo) (bool, error) {
		rep, _ := protocol.AgentUpdateFromMetadata(info.CustomMetadata)
		if f := rep.Failed; f != nil && f.SHA256 == rel.SHA256 && (before == nil || *f != *before) {
			return false, fmt.Errorf("agent %s was rolled back on the device: %s", rel.Version, f.Reason)
		}
		return rep.Running == rel.SHA256, nil
	})
	if ctx.Err() != nil {
		return fmt.Errorf("agent %s applied, but the device did not register with it: %w", rel.Version, err)
	}
	return err
}

// agentLeft waits until device id registers running another agent than
// rel, or ctx ends.
func (e *Engine) agentLeft(ctx context.Context, id string, rel agentrelease.Release) error {
	err := e.awaitReport(ctx, id, func(info *protocol.SystemInfo) (bool, error) {
		rep, _ := protocol.AgentUpdateFromMetadata(info.CustomMetadata)
		return rep.Running != rel.SHA256, nil
	})
	if err != nil {
		return fmt.Errorf("agent %s taken back, but the device did not register with the one before: %w", rel.Version, err)
	}
	return nil
}

// endTrial commits the release on trial once the health checks passed,
// or rejects it with why they did not; a device that cannot be told
// brings its previous agent back at the trial's bound.
func (c *deviceChange) endTrial(sha string, health error) error {
	commit := health == nil
	reason := ""
	if !commit {
		reason = health.Error()
	}
	_, err := c.command(protocol.Command{ToolName: protocol.EndTrialName, ToolType: protocol.ToolAction,
		Parameters: protocol.EndTrialParams(sha, commit, reason)})
	if err != nil && commit {
		return fmt.Errorf("commit the agent: %w", err)
	}
	return health
}

// streamCacheSize bounds the compressed releases kept: one per platform
// of the fleet, for the rollouts running.
const streamCacheSize = 4

// releaseStream is rel's binary compressed (compressRelease), once for
// every device it goes to.
func (e *Engine) releaseStream(ctx context.Context, rel agentrelease.Release) ([]byte, error) {
	return e.streams.get(rel.SHA256, func() ([]byte, error) {
		m, err := e.cfg.Store.Rollouts().Module(ctx, rel.SHA256)
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", rel.Version, err)
		}
		return compressRelease(m.Body)
	})
}

// compressRelease is body compressed with zstd at its best, with a
// window a small device decompresses in 4 MiB.
func compressRelease(body []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithWindowSize(4<<20), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(body); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
