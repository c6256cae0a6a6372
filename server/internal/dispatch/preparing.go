package dispatch

import (
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
)

// preparation is a device's preparation of the tool of a command it
// accepted, as it tells it (PREPARING), and what it did to the
// command's deadline, guarded by dispatcher.mu. While the device
// prepares, the command's timeout is held: it fails only at its deadline
// as it was before any preparation (base) plus the bound. Once the
// device says the tool is ready, the deadline is base plus the time
// spent preparing, in all at most the bound (server RATIONALE.md, "A
// command's deadline").
type preparation struct {
	base     time.Time     // the deadline before any preparation; zero until the first
	since    time.Time     // when the preparation under way began; zero if none is
	spent    time.Duration // in the preparations that ended, at most the bound
	tool     string        // the tool being prepared
	bound    time.Duration // the dispatcher's prepBound
	lastSaid protocol.Preparing
}

// under reports whether a preparation is under way.
func (p *preparation) under() bool { return !p.since.IsZero() }

// overBound is why a command for device id with timeout failed while its
// tool was still being prepared.
func (p *preparation) overBound(id string, timeout time.Duration) string {
	return fmt.Sprintf("device %q was still preparing tool %q (%s) when the command's timeout of %s and the preparation bound of %s ended",
		id, p.tool, p.lastSaid.Stage, timeout, p.bound)
}

// Preparing takes device deviceID's word that it prepares the tool of
// command rid, which it accepted (PREPARING), heard on its link here or
// passed on by the node that holds it: a command waiting here holds its
// deadline for it, and whoever follows the command hears it; one another
// node sent here has the word passed on to that node. A word about a
// command that waits nowhere changes nothing: its outcome is the device's
// results, whenever they come.
func (d *Dispatcher) Preparing(deviceID, rid string, p protocol.Preparing) {
	d.mu.Lock()
	cmd := d.pending[rid]
	if cmd == nil || cmd.rec.DeviceID != deviceID {
		d.mu.Unlock()
		d.remote.preparingHere(deviceID, rid, p)
		return
	}
	began := cmd.prep.said(p, cmd.deadline, d.prepBound, time.Now())
	cmd.deadline = cmd.prep.deadline(cmd.deadline)
	if cmd.timer != nil {
		cmd.timer.Reset(time.Until(cmd.deadline))
	}
	deadline := cmd.deadline
	d.mu.Unlock()
	if began {
		cmd.log.Info("device is preparing the tool; the command's timeout is held meanwhile", "tool", p.ToolName, "stage", p.Stage,
			"until_at_most", deadline.Format(time.RFC3339))
	}
	if cmd.onPreparing != nil {
		cmd.onPreparing(p)
	}
}

// said records what the device said, p, at now, of a command whose
// deadline is deadline, under the bound; began: a preparation began.
func (p *preparation) said(m protocol.Preparing, deadline time.Time, bound time.Duration, now time.Time) (began bool) {
	if p.base.IsZero() {
		p.base, p.bound = deadline, bound
	}
	p.lastSaid, p.tool = m, m.ToolName
	switch {
	case m.Stage == protocol.PreparingReady && p.under():
		p.spent = min(p.spent+now.Sub(p.since), p.bound)
		p.since = time.Time{}
	case m.Stage != protocol.PreparingReady && !p.under():
		p.since, began = now, true
	}
	return began
}

// deadline is the command's deadline now, given its deadline before.
func (p *preparation) deadline(before time.Time) time.Time {
	switch {
	case p.base.IsZero():
		return before
	case p.under():
		return p.base.Add(p.bound)
	}
	return p.base.Add(p.spent)
}
