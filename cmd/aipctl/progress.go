package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
)

// redrawEvery is how often a terminal's progress lines tick, so that the
// elapsed times move while nothing happens.
const redrawEvery = 250 * time.Millisecond

// progress shows a task's events as they come, a line per device: on a
// terminal, the lines are redrawn in place (carriage return, cursor up);
// anywhere else, each event is one plain line, for logs.
type progress struct {
	w     io.Writer
	tty   bool
	start time.Time

	mu    sync.Mutex
	order []string
	lines map[string]*deviceProgress
	drawn int // lines on the terminal from the last redraw
}

// deviceProgress is where one device's task is.
type deviceProgress struct {
	state          api.TaskState
	step, steps    int // step counts from 1; 0 before the first
	tool           string
	attempt        int
	started, ended time.Time
	err            string
}

func newProgress(w io.Writer, tty bool, devices []string) *progress {
	p := &progress{w: w, tty: tty, start: time.Now(), lines: map[string]*deviceProgress{}}
	for _, id := range devices {
		p.line(id)
	}
	return p
}

// isTerminal reports whether w is a terminal that understands cursor
// movement.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (p *progress) line(id string) *deviceProgress {
	d := p.lines[id]
	if d == nil {
		d = &deviceProgress{state: api.StatePending}
		p.lines[id] = d
		p.order = append(p.order, id)
	}
	return d
}

// tick redraws a terminal's lines until ctx ends.
func (p *progress) tick(ctx context.Context) {
	if !p.tty {
		return
	}
	t := time.NewTicker(redrawEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.mu.Lock()
			p.redraw()
			p.mu.Unlock()
		}
	}
}

// event takes one of the task's events.
func (p *progress) event(e api.TaskEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Type == api.EventEnd && e.DeviceID == "" {
		// A fleet's own end: its devices have ended already.
		if p.tty {
			p.redraw()
		}
		return
	}
	now := time.Now()
	d := p.line(e.DeviceID)
	switch e.Type {
	case api.EventDeviceStart:
		d.state, d.started, d.steps = api.StateRunning, now, e.Steps
	case api.EventStepStart:
		if d.started.IsZero() {
			d.started = now
		}
		d.state, d.tool, d.attempt = api.StateRunning, e.Tool, e.Attempt
		if e.Step != nil {
			d.step = *e.Step + 1
		}
		if e.Steps > 0 {
			d.steps = e.Steps
		}
	case api.EventDeviceEnd, api.EventEnd:
		d.state, d.ended, d.err = e.State, now, e.Error
		if d.started.IsZero() {
			d.started = now
		}
	}
	if p.tty {
		p.redraw()
	} else {
		p.plain(e, d)
	}
}

// redraw writes every line again over the last ones.
func (p *progress) redraw() {
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn)
	}
	width := p.idWidth()
	now := time.Now()
	for _, id := range p.order {
		b.WriteString("\r\x1b[2K")
		b.WriteString(p.lines[id].text(id, width, now))
		b.WriteByte('\n')
	}
	p.drawn = len(p.order)
	io.WriteString(p.w, b.String())
}

func (p *progress) idWidth() int {
	w := 0
	for _, id := range p.order {
		w = max(w, len(id))
	}
	return w
}

// maxErrorWidth keeps a terminal line on one line.
const maxErrorWidth = 80

// text is a device's line: id, state, step, tool, elapsed, error.
func (d *deviceProgress) text(id string, width int, now time.Time) string {
	line := fmt.Sprintf("%-*s  %-9s", width, id, d.state)
	if d.step > 0 {
		line += fmt.Sprintf("  step %d/%d %s", d.step, d.steps, d.tool)
		if d.attempt > 1 {
			line += fmt.Sprintf(" (attempt %d)", d.attempt)
		}
	}
	if !d.started.IsZero() {
		line += "  " + d.elapsed(now)
	}
	if d.err != "" {
		line += "  " + truncate(d.err, maxErrorWidth)
	}
	return strings.TrimRight(line, " ")
}

func (d *deviceProgress) elapsed(now time.Time) string {
	end := d.ended
	if end.IsZero() {
		end = now
	}
	return seconds(end.Sub(d.started))
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// plain writes one line for an event, stamped with the time since the
// start.
func (p *progress) plain(e api.TaskEvent, d *deviceProgress) {
	step := fmt.Sprintf("step %d/%d %s", d.step, d.steps, d.tool)
	if d.attempt > 1 {
		step += fmt.Sprintf(" (attempt %d)", d.attempt)
	}
	var what string
	switch e.Type {
	case api.EventDeviceStart:
		what = "started"
	case api.EventStepStart:
		what = step
	case api.EventStepEnd:
		what = step + " " + e.Status
		if e.Error != "" {
			what += ": " + e.Error
		}
	default:
		what = fmt.Sprintf("%s in %s", d.state, d.elapsed(time.Now()))
		if d.err != "" {
			what += ": " + d.err
		}
	}
	fmt.Fprintf(p.w, "[%6s] %s: %s\n", seconds(time.Since(p.start)), e.DeviceID, what)
}
