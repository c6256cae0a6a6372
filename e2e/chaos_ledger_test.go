package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
)

// chaosOp is one command of the chaos run's load, and what its caller
// was told.
type chaosOp struct {
	id    string // its line, its file's name and its first Idempotency-Key
	dev   string
	path  string
	first int // the node of its first attempt
	start time.Time

	// Set by the goroutine running it, read once the load has stopped.
	end      time.Time
	verdict  chaosVerdict // what its caller was told in the end
	answer   string       // the last answer
	session  string       // the last task an answer named, if any
	sessions []string     // every task an answer named
	attempts []string     // each attempt: node, key, what it was told
}

// chaosVerdict is what a caller was told about its command.
type chaosVerdict int

const (
	// verdictOK: success.
	verdictOK chaosVerdict = iota
	// verdictFailed: a definite failure; the command will not run.
	verdictFailed
	// verdictRefused: not taken (a node away, draining, fenced, or the
	// device not online there); the caller may send it anew.
	verdictRefused
	// verdictUnknown: it may still run (the answer says so, or none came).
	verdictUnknown
)

// chaosAnswer is one attempt's answer, read.
type chaosAnswer struct {
	verdict chaosVerdict
	text    string
	session string // the task it names, if any
	// last: the command's own last word (success, a failure, or a failure
	// that says it may still run), which a repeat would only replay.
	last bool
}

// taskNamed finds the task an error names ("task ID: …").
var taskNamed = regexp.MustCompile(`task (\S+?)[:;, ]`)

// readAnswer reads what a command's caller was told. A failure is
// definite unless it says the command may still run; an error whose
// answer never came, or that says how the task ends is not known there
// (its node lost its lease, or handed it off), leaves it unknown; a 503
// or "Client not online" that started nothing is a refusal.
func readAnswer(resp api.CommandResponse, err error) chaosAnswer {
	var se *api.StatusError
	switch {
	case err == nil && resp.Succeeded():
		return chaosAnswer{verdictOK, "success", resp.SessionID, true}
	case err == nil && strings.Contains(resp.FirstError(), "it may still run"):
		return chaosAnswer{verdictUnknown, "failure: " + resp.FirstError(), resp.SessionID, true}
	case err == nil:
		return chaosAnswer{verdictFailed, "failure: " + resp.FirstError(), resp.SessionID, true}
	case !errors.As(err, &se):
		return chaosAnswer{verdictUnknown, err.Error(), "", false}
	}
	text := fmt.Sprintf("%d %s", se.Code, se.Message)
	session := ""
	if m := taskNamed.FindStringSubmatch(se.Message); m != nil {
		session = m[1]
	}
	switch {
	case se.Code == http.StatusServiceUnavailable && (strings.Contains(se.Message, "how it ends is not known here") ||
		strings.Contains(se.Message, "its tasks go on on another node")),
		se.Code == http.StatusConflict && strings.Contains(se.Message, "idempotency key already recorded"):
		return chaosAnswer{verdictUnknown, text, session, false}
	case se.Code == http.StatusServiceUnavailable, se.Code == http.StatusNotFound && strings.Contains(se.Message, "not online"):
		return chaosAnswer{verdictRefused, text, session, false}
	}
	return chaosAnswer{verdictFailed, text, session, true}
}

// chaosLoad is the open load of one phase.
type chaosLoad struct {
	cc      *chaosCluster
	phase   string
	done    chan struct{}
	stopped chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	ops     []*chaosOp
}

// startLoad starts a command every 1/chaosRate s, through node i%3 for
// the i-th, to a device picked at random, until stop.
func (cc *chaosCluster) startLoad(phase string) *chaosLoad {
	l := &chaosLoad{cc: cc, phase: phase, done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(l.stopped)
		tick := time.NewTicker(time.Second / chaosRate)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.done:
				return
			case <-tick.C:
			}
			dev := cc.devs[rand.IntN(len(cc.devs))]
			id := fmt.Sprintf("%s-%05d", phase, i)
			op := &chaosOp{id: id, dev: dev, path: filepath.Join(cc.files, dev, id), first: i % len(cc.apis), start: time.Now()}
			l.mu.Lock()
			l.ops = append(l.ops, op)
			l.mu.Unlock()
			l.wg.Go(func() { l.run(op) })
		}
	}()
	return l
}

// stop starts no more commands, waits for those running to end, and
// returns them all.
func (l *chaosLoad) stop() []*chaosOp {
	close(l.done)
	<-l.stopped
	l.wg.Wait()
	return l.ops
}

// run sends op, as a careful client would: through the next node, after a
// pause, while it is refused or no answer came or its node could not say
// how it ends (a repeat then gets the first request's outcome), for up to
// chaosRetryFor; with the same Idempotency-Key once an attempt may have
// started it, with a new one after refusals alone (a refusal started
// nothing: were that false, the command would run twice).
func (l *chaosLoad) run(op *chaosOp) {
	key, mayHaveStarted := op.id, false
	req := api.CommandRequest{Timeout: chaosTimeout, Actions: []protocol.Command{{ToolName: "write_file",
		Parameters: map[string]any{"path": op.path, "content": op.id + "\n", "append": true}}}}
	for try := 0; ; try++ {
		n := (op.first + try) % len(l.cc.apis)
		req.IdempotencyKey = key
		began := time.Now()
		a := readAnswer(l.cc.apis[n].Command(context.Background(), op.dev, req))
		op.attempts = append(op.attempts, fmt.Sprintf("+%.1fs node-%d key %s, %.1fs: %s",
			began.Sub(op.start).Seconds(), n, key, time.Since(began).Seconds(), a.text))
		op.answer, op.verdict = a.text, a.verdict
		if a.session != "" {
			op.session = a.session
			if !slices.Contains(op.sessions, a.session) {
				op.sessions = append(op.sessions, a.session)
			}
		}
		mayHaveStarted = mayHaveStarted || a.verdict == verdictUnknown
		if a.last || time.Since(op.start) > chaosRetryFor {
			break
		}
		if a.verdict == verdictRefused && !mayHaveStarted {
			key = fmt.Sprintf("%s-%d", op.id, try+1)
		}
		time.Sleep(min(time.Duration(try+1)*200*time.Millisecond, 2*time.Second))
	}
	if mayHaveStarted && op.verdict == verdictRefused {
		op.verdict = verdictUnknown
	}
	op.end = time.Now()
}

// chaosTally is one phase's figures.
type chaosTally struct {
	fault, node                   string
	commands, ok, failed, unknown int
	lost, failedButRan, twice     []*chaosOp
	unrecorded                    []*chaosOp // unknowns whose outcome the store does not show
	unavailable, unavailableAt    time.Duration
	deviceUnavailable             time.Duration
	servingAgain                  time.Duration
	unended                       int
	serving                       bool
}

// tally counts phase p's commands against the devices' files and the
// store.
func (cc *chaosCluster) tally(p *chaosPhase) chaosTally {
	tl := chaosTally{fault: p.name, node: "-", commands: len(p.ops), servingAgain: p.servingAgain, serving: p.serving, unended: len(p.unended)}
	if p.node >= 0 {
		tl.node = fmt.Sprintf("node-%d (%d devices)", p.node, p.devicesThere)
	}
	for _, op := range p.ops {
		ran := linesOf(op)
		if ran > 1 {
			tl.twice = append(tl.twice, op)
		}
		switch op.verdict {
		case verdictOK:
			tl.ok++
			if ran == 0 {
				tl.lost = append(tl.lost, op)
			}
		case verdictFailed, verdictRefused:
			tl.failed++
			if ran > 0 {
				tl.failedButRan = append(tl.failedButRan, op)
			}
		case verdictUnknown:
			tl.unknown++
			if !cc.outcomeRecorded(op, ran) {
				tl.unrecorded = append(tl.unrecorded, op)
			}
		}
	}
	tl.unavailable, tl.unavailableAt = longestWithoutSuccess(p.ops, p.loadFrom, p.loadTo)
	tl.unavailableAt -= p.faultFrom.Sub(p.loadFrom)
	for _, dev := range cc.devs {
		its := slices.DeleteFunc(slices.Clone(p.ops), func(op *chaosOp) bool { return op.dev != dev })
		gap, _ := longestWithoutSuccess(its, p.loadFrom, p.loadTo)
		tl.deviceUnavailable = max(tl.deviceUnavailable, gap)
	}
	return tl
}

// linesOf counts op's line in its file on its device: how many times it
// ran.
func linesOf(op *chaosOp) int {
	b, err := os.ReadFile(op.path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), op.id+"\n")
}

// outcomeRecorded reports whether the store shows how op, which may have
// run, ended, as the device's file says it did: a command done with
// success if it ran, and nothing done or pending if not.
func (cc *chaosCluster) outcomeRecorded(op *chaosOp, ran int) bool {
	task, ok := cc.task(op.session)
	if !ok || len(task.Commands) == 0 {
		return false
	}
	done, pending := false, false
	for _, c := range task.Commands {
		done = done || c.Status == "done" && api.FirstError(c.Results) == ""
		pending = pending || c.Status == "pending"
	}
	if ran > 0 {
		return done
	}
	return !done && !pending
}

// task is session's record, from the first node that has it.
func (cc *chaosCluster) task(session string) (api.Task, bool) {
	if session == "" {
		return api.Task{}, false
	}
	for _, c := range cc.apis {
		if task, err := c.Task(context.Background(), session); err == nil {
			return task, true
		}
	}
	return api.Task{}, false
}

// longestWithoutSuccess is the longest stretch between from and to in
// which none of ops succeeded, and when it began, since from.
func longestWithoutSuccess(ops []*chaosOp, from, to time.Time) (gap, at time.Duration) {
	ends := []time.Time{from}
	for _, op := range ops {
		if op.verdict == verdictOK && op.end.Before(to) {
			ends = append(ends, op.end)
		}
	}
	ends = append(ends, to)
	slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(ends); i++ {
		if d := ends[i].Sub(ends[i-1]); d > gap {
			gap, at = d, ends[i-1].Sub(from)
		}
	}
	return gap, at
}

// chaosTable is the phases' figures as a Markdown table.
func chaosTable(tallies []chaosTally) string {
	var b strings.Builder
	b.WriteString("| fault | on | commands | ok | failed | unknown (outcome recorded) | acknowledged-and-lost | answered-failed-but-ran | ran-twice | unavailable s (from, since the fault) | longest a device had no success, s | all serving again, s after it healed | tasks never ended |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, tl := range tallies {
		again := fmt.Sprintf("%.1f", tl.servingAgain.Seconds())
		if !tl.serving {
			again = "not within " + chaosRecoverBound.String()
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d (%d) | %d | %d | %d | %.1f (%+.1f) | %.1f | %s | %d |\n",
			tl.fault, tl.node, tl.commands, tl.ok, tl.failed, tl.unknown, tl.unknown-len(tl.unrecorded),
			len(tl.lost), len(tl.failedButRan), len(tl.twice), tl.unavailable.Seconds(), tl.unavailableAt.Seconds(),
			tl.deviceUnavailable.Seconds(), again, tl.unended)
	}
	return b.String()
}

// check fails the test for each breach of phase p, with its evidence.
func (cc *chaosCluster) check(p *chaosPhase, tl chaosTally) {
	t := cc.t
	for what, ops := range map[string][]*chaosOp{
		"acknowledged, yet never ran": tl.lost, "answered failed, yet ran": tl.failedButRan,
		"ran twice": tl.twice, "outcome unknown to its caller, and not recorded as the device says": tl.unrecorded,
	} {
		if !assert.Empty(t, ops, "%s: %d commands %s", p.name, len(ops), what) {
			for _, op := range ops[:min(len(ops), 5)] {
				t.Logf("%s: %s %s:\n%s", p.name, op.id, what, cc.evidence(p.faultFrom, op))
			}
		}
	}
	bound := chaosFencingBound + chaosUnavailableSlack
	assert.LessOrEqual(t, tl.unavailable, bound, "%s: no command through any node succeeded for %s", p.name, tl.unavailable)
	assert.True(t, p.serving, "%s: the cluster did not serve again by itself within %s of the fault's end", p.name, chaosRecoverBound)
	assert.Empty(t, p.unended, "%s: tasks still running %s after the phase (evidence above)", p.name, chaosRecoverBound)
}

// evidence is what is known of op: what its caller was told, when it ran
// on its device, since the fault began at faultFrom, each task its
// answers named as the store has it (and which node owns it), and what
// the nodes logged of them.
func (cc *chaosCluster) evidence(faultFrom time.Time, op *chaosOp) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  device %s, started %+.1fs since the fault began, told %q\n", op.dev, op.start.Sub(faultFrom).Seconds(), op.answer)
	for _, a := range op.attempts {
		fmt.Fprintf(&b, "  attempt %s\n", a)
	}
	if st, err := os.Stat(op.path); err == nil {
		fmt.Fprintf(&b, "  its line: %d, last written %+.1fs since the fault began, %+.1fs since its caller's answer\n",
			linesOf(op), st.ModTime().Sub(faultFrom).Seconds(), st.ModTime().Sub(op.end).Seconds())
	} else {
		b.WriteString("  its line: none\n")
	}
	ids := []string{op.id}
	for _, session := range op.sessions {
		task, ok := cc.task(session)
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "  task %s (owner %s): %s, %q\n", task.SessionID, cc.owner(session), task.State, task.Error)
		ids = append(ids, task.SessionID)
		for _, c := range task.Commands {
			fmt.Fprintf(&b, "    command %s attempt %d: %s late=%v %q results %v\n", c.ResponseID, c.Attempt, c.Status, c.Late, c.Error, c.Results)
			ids = append(ids, c.ResponseID)
		}
	}
	for _, proc := range cc.processes() {
		for _, line := range strings.Split(proc.logs.String(), "\n") {
			if slices.ContainsFunc(ids, func(id string) bool { return id != "" && strings.Contains(line, id) }) {
				fmt.Fprintf(&b, "  node-%d: %s\n", cc.nodeOf(proc), line)
			}
		}
	}
	return b.String()
}

// owner is the node, and its epoch, that owns session, as the store says:
// what the API does not show.
func (cc *chaosCluster) owner(session string) string {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cc.dsn)
	if err != nil {
		return err.Error()
	}
	defer conn.Close(ctx)
	var node string
	var epoch int64
	if err := conn.QueryRow(ctx, `SELECT owner_node, owner_epoch FROM sessions WHERE id = $1`, session).Scan(&node, &epoch); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%s epoch %d", node, epoch)
}

// answerKinds counts the last answers of ops that did not succeed, alike
// but for ids, names and numbers, most frequent first: what callers were
// told, for the report.
func answerKinds(ops []*chaosOp) string {
	counts := map[string]int{}
	for _, op := range ops {
		if op.verdict != verdictOK {
			counts[fmt.Sprintf("%s: %s", op.verdict, answerShape.ReplaceAllString(op.answer, "_"))]++
		}
	}
	kinds := slices.Collect(maps.Keys(counts))
	slices.SortFunc(kinds, func(a, b string) int { return counts[b] - counts[a] })
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %4d %s\n", counts[k], k)
	}
	return b.String()
}

// answerShape is what varies between answers of one kind.
var answerShape = regexp.MustCompile(`"[^"]*"|[0-9a-f]{8}-[0-9a-f-]{27}|[0-9]+(\.[0-9]+)?(ms|s|µs)?`)

func (v chaosVerdict) String() string {
	return [...]string{"ok", "failed", "refused", "unknown"}[v]
}
