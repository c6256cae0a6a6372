package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// The budgets of issue 9. It writes MB for memory as for files; we read
// both as 10^6 bytes, the stricter reading for memory.
const (
	binaryBudget   = 15e6 // bytes, the stripped linux/arm64 agent
	idleRSSBudget  = 20e6 // bytes, idle after registration, stock tools loaded
	idleRSSGoal    = 15e6 // bytes
	startupBudget  = time.Second
	budgetedBinary = "aip-agent-linux-arm64"
)

// report prints the table of figures, each beside its budget if it has
// one, and remembers those over it.
type report struct {
	over []string
}

// row prints a figure that has no budget.
func (r *report) row(what, figure string) { r.bounded(what, figure, "", true) }

// bounded prints a figure and its budget, marking and remembering it if
// it is not within.
func (r *report) bounded(what, figure, budget string, within bool) {
	if !within {
		r.over = append(r.over, fmt.Sprintf("%s: %s, budget %s", what, figure, budget))
		budget += " **over budget**"
	}
	fmt.Printf("| %s | %s | %s |\n", what, figure, budget)
}

// sizes lists the agent binaries make cross built; the arm64 one has a
// budget, and must be there.
func (r *report) sizes(dir string) {
	entries, _ := os.ReadDir(dir)
	budgeted := false
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !strings.HasPrefix(e.Name(), "aip-agent-") {
			continue
		}
		what, figure := e.Name()+" (static, stripped)", fmt.Sprintf("%.1f MB", float64(fi.Size())/1e6)
		if e.Name() == budgetedBinary {
			budgeted = true
			r.bounded(what, figure, fmt.Sprintf("≤ %.0f MB", binaryBudget/1e6), fi.Size() <= binaryBudget)
		} else {
			r.row(what, figure)
		}
	}
	if !budgeted {
		r.bounded(budgetedBinary, "not built", fmt.Sprintf("≤ %.0f MB", binaryBudget/1e6), false)
	}
}

// startup prints a time from start to registered.
func (r *report) startup(what string, d time.Duration) {
	r.bounded(what, d.Round(time.Millisecond).String(), "≤ "+startupBudget.String(), d <= startupBudget)
}

// idleRSS prints the idle agent's memory.
func (r *report) idleRSS(what string, rss rssReadings) {
	budget := fmt.Sprintf("≤ %.1f MiB (%.0f MB), goal %.1f MiB (%.0f MB)",
		idleRSSBudget/(1<<20), idleRSSBudget/1e6, idleRSSGoal/(1<<20), idleRSSGoal/1e6)
	r.bounded(what, rss.String(), budget, rss.median()*1024 <= idleRSSBudget)
}

// busy prints the memory while concurrentCalls ran, and fails if they did
// not all run at once: the figure would not be what it says. Of the
// snapshot mappings (one per running call of a snapshot tool) it prints
// what they hold resident, split into the pages the calls wrote (their
// own copies) and the image's pages they map.
func (r *report) busy(b busyFigures) {
	what := fmt.Sprintf("RSS peak during %d concurrent hash_file calls (%d MiB file; %d ran at once)", concurrentCalls, b.fileMiB, b.overlapped)
	r.bounded(what, fmt.Sprintf("%.1f MiB", mib(b.peak)), fmt.Sprintf("%d calls at once", concurrentCalls), b.overlapped == concurrentCalls)
	s := b.snapshots
	if s.count == 0 {
		r.row("snapshot mappings during those calls (smaps)", "none: hash_file is not a snapshot tool")
		return
	}
	r.row(fmt.Sprintf("snapshot mappings during those calls (smaps): %d, of %.1f MiB of image each", s.count, mib(s.size)/float64(s.count)),
		fmt.Sprintf("resident %.1f MiB (Pss %.1f MiB): %.1f MiB the calls wrote (Anonymous), %.1f MiB of image pages they map; %d copies of the image would be %.1f MiB",
			mib(s.rss), mib(s.pss), mib(s.written), mib(s.rss-s.written), s.count, mib(s.size)))
}

// err names every figure over its budget.
func (r *report) err() error {
	if len(r.over) == 0 {
		return nil
	}
	return errors.New("over budget:\n  " + strings.Join(r.over, "\n  "))
}
