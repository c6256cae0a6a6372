package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/edgeaip/edgeaip/server/api"
	"golang.org/x/term"
)

// redrawEvery is how often a terminal's progress lines tick, so that the
// elapsed times move while nothing happens.
const redrawEvery = 250 * time.Millisecond

// progress shows a task's events as they come, a line per device: on a
// terminal, the lines are redrawn in place (carriage return, cursor up);
// anywhere else, each event is one plain line, for logs. Cursor movement
// cannot reach lines that scrolled off the top, so a terminal with fewer
// rows than there are devices gets plain lines too.
type progress struct {
	w     io.Writer
	start time.Time

	mu sync.Mutex
	// rows reads the terminal's height (0 if unknown); nil when w is no
	// terminal, or once the devices outgrew it.
	rows  func() int
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

// newProgress shows progress on w; rows is as terminalRows returns it.
func newProgress(w io.Writer, rows func() int, devices []string) *progress {
	p := &progress{w: w, rows: rows, start: time.Now(), lines: map[string]*deviceProgress{}}
	for _, id := range devices {
		p.line(id)
	}
	return p
}

// terminalRows returns, if w is a terminal that understands cursor
// movement, a function that reads its height in rows (0 if unknown);
// else nil.
func terminalRows(w io.Writer) func() int {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return func() int {
		_, h, err := term.GetSize(int(f.Fd()))
		if err != nil {
			return 0
		}
		return h
	}
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
	t := time.NewTicker(redrawEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		if p.rows == nil {
			p.mu.Unlock()
			return
		}
		p.redraw()
		p.mu.Unlock()
	}
}

// event takes one of the task's events.
func (p *progress) event(e api.TaskEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Type == api.EventEnd && e.DeviceID == "" {
		// A fleet's own end: its devices have ended already.
		if p.rows != nil {
			p.redraw()
		}
		return
	}
	now := time.Now()
	d := p.line(e.DeviceID)
	switch e.Type {
	case api.EventDeviceStart:
		d.state, d.started, d.steps = api.StateRunning, now, e.Steps
	case api.EventStepStart, api.EventStepEnd:
		// A step that fails before it starts (an unknown tool) has only
		// its step_end, which must then say which step and tool it was.
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
	if p.rows != nil {
		p.redraw()
	}
	if p.rows == nil { // not a terminal, or redraw just gave up on it
		p.plain(e, d)
	}
}

// redraw writes every line again over the last ones; when they no longer
// fit on the terminal, it switches to plain lines instead.
func (p *progress) redraw() {
	if rows := p.rows(); rows > 0 && len(p.order) >= rows {
		p.rows = nil
		fmt.Fprintf(p.w, "%d devices do not fit in %d rows: one line per event from here on\n", len(p.order), rows)
		return
	}
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
	if step := d.stepText(); step != "" {
		line += "  " + step
	}
	if !d.started.IsZero() {
		line += "  " + d.elapsed(now)
	}
	if d.err != "" {
		line += "  " + truncate(d.err, maxErrorWidth)
	}
	return strings.TrimRight(line, " ")
}

// stepText is "step i/n tool (attempt k)", without what is not known
// yet: nothing before the first step, no n from a server that does not
// say.
func (d *deviceProgress) stepText() string {
	if d.step == 0 {
		return ""
	}
	s := fmt.Sprintf("step %d", d.step)
	if d.steps > 0 {
		s += fmt.Sprintf("/%d", d.steps)
	}
	s += " " + d.tool
	if d.attempt > 1 {
		s += fmt.Sprintf(" (attempt %d)", d.attempt)
	}
	return s
}

func (d *deviceProgress) elapsed(now time.Time) string {
	end := d.ended
	if end.IsZero() {
		end = now
	}
	return seconds(end.Sub(d.started))
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// truncate puts s on one line of at most n characters (runes: a cut
// must not split a UTF-8 sequence).
func truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// plain writes one line for an event, stamped with the time since the
// start.
func (p *progress) plain(e api.TaskEvent, d *deviceProgress) {
	var what string
	switch e.Type {
	case api.EventDeviceStart:
		what = "started"
	case api.EventStepStart:
		what = d.stepText()
	case api.EventStepEnd:
		what = d.stepText() + " " + e.Status
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
