package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"golang.org/x/term"
)

// redrawEvery is how often a terminal's progress lines tick, so that the
// elapsed times move while nothing happens.
const redrawEvery = 250 * time.Millisecond

// progress shows a task's events as they come, a line per device: on a
// terminal, the lines are redrawn in place (carriage return, cursor up);
// anywhere else, each event is one plain line, for logs. Each device's
// line is cut to the terminal's width, so that it takes one row and going
// up as many rows as there are devices reaches the first. Cursor movement
// cannot reach lines that scrolled off the top, so a terminal with fewer
// rows than there are devices gets plain lines too.
type progress struct {
	w     io.Writer
	start time.Time

	mu sync.Mutex
	// size reads the terminal's width and height (a height of 0 if
	// unknown); nil when w is no terminal, or once the devices outgrew it.
	size  func() (cols, rows int)
	order []string
	lines map[string]*deviceProgress
	drawn int // rows on the terminal from the last redraw, one per line
}

// deviceProgress is where one device's task is.
type deviceProgress struct {
	state          api.TaskState
	step, steps    int // step counts from 1; 0 before the first
	tool           string
	attempt        int
	preparing      string // what the device says of the tool's preparation, until it ends
	started, ended time.Time
	err            string
}

// newProgress shows progress on w; size is as terminalSize returns it.
func newProgress(w io.Writer, size func() (cols, rows int), devices []string) *progress {
	p := &progress{w: w, size: size, start: time.Now(), lines: map[string]*deviceProgress{}}
	for _, id := range devices {
		p.line(id)
	}
	return p
}

// defaultColumns is the width of a terminal that does not say, nor
// $COLUMNS.
const defaultColumns = 80

// terminalSize returns, if w is a terminal that understands cursor
// movement, a function that reads its width and height; else nil. A
// terminal that does not say its width has $COLUMNS, or defaultColumns;
// one that does not say its height, 0.
func terminalSize(w io.Writer) func() (cols, rows int) {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	fallback, err := strconv.Atoi(os.Getenv("COLUMNS"))
	if err != nil || fallback <= 0 {
		fallback = defaultColumns
	}
	return func() (int, int) {
		cols, rows, err := term.GetSize(int(f.Fd()))
		if err != nil || cols <= 0 {
			return fallback, max(rows, 0)
		}
		return cols, rows
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
		if p.size == nil {
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
		if p.size != nil {
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
		d.state, d.tool, d.attempt, d.preparing = api.StateRunning, e.Tool, e.Attempt, ""
		if e.Step != nil {
			d.step = *e.Step + 1
		}
		if e.Steps > 0 {
			d.steps = e.Steps
		}
	case api.EventPreparing:
		d.preparing = ""
		if e.Preparing == nil || e.Preparing.Stage != protocol.PreparingReady {
			d.preparing = api.PreparingText(e.Preparing)
		}
	case api.EventDeviceEnd, api.EventEnd:
		d.state, d.ended, d.err = e.State, now, e.Error
		if d.started.IsZero() {
			d.started = now
		}
	}
	if p.size != nil {
		p.redraw()
	}
	if p.size == nil { // not a terminal, or redraw just gave up on it
		p.plain(e, d)
	}
}

// redraw writes every line again over the last ones; when they no longer
// fit on the terminal, it switches to plain lines instead.
func (p *progress) redraw() {
	cols, rows := p.size()
	if rows > 0 && len(p.order) >= rows {
		p.size = nil
		fmt.Fprintf(p.w, "%d devices do not fit in %d rows: one line per event from here on\n", len(p.order), rows)
		return
	}
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn)
	}
	idWidth := p.idWidth()
	// A line as wide as the terminal would wrap on some terminals, and
	// leave the cursor past the edge on others.
	lineWidth := max(cols-1, 1)
	now := time.Now()
	for _, id := range p.order {
		b.WriteString("\r\x1b[2K")
		b.WriteString(truncate(p.lines[id].text(id, idWidth, now), lineWidth))
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

// text is a device's line: id, state, step, tool, elapsed, error.
func (d *deviceProgress) text(id string, width int, now time.Time) string {
	line := fmt.Sprintf("%-*s  %-9s", width, id, d.state)
	if step := d.stepText(); step != "" {
		line += "  " + step
	}
	if d.preparing != "" {
		line += ": " + d.preparing
	}
	if !d.started.IsZero() {
		line += "  " + d.elapsed(now)
	}
	if d.err != "" {
		line += "  " + d.err
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
// must not split a UTF-8 sequence). Control characters become spaces: a
// newline, a carriage return or an escape sequence from an error message
// must not move the cursor.
func truncate(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
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
	case api.EventPreparing:
		what = d.stepText() + ": " + api.PreparingText(e.Preparing) // once ready, stepText no longer says it
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
