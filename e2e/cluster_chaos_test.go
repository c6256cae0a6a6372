package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/blackhole"
	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/require"
)

// TestClusterChaos is make chaos-cluster: three aip-server processes, one
// PostgreSQL, one NATS (natsd), 15 agents each holding all three nodes'
// URLs, and a steady load of commands through every node, each appending
// a line of its own on its device. One fault a phase, on the node holding
// the most devices where the fault has a node: kill -9; SIGSTOP, then
// SIGCONT; a partition from NATS; a partition from PostgreSQL; an outage
// of PostgreSQL (an immediate shutdown, then a start); a rolling restart
// (SIGTERM of each node in turn). The partitions go through
// internal/blackhole, a proxy between each node and NATS and between each
// node and PostgreSQL that stops forwarding without closing anything, as
// a network that drops every packet does.
//
// For every fault it counts, from the devices' files and the callers'
// answers: acknowledged-and-lost (success, no line), answered-failed-but-
// ran (a definite failure, yet a line), ran-twice (two lines), the
// unknowns (answers that say the command may still run) and whether the
// store recorded how each ended, and the longest stretch in which no
// command through any node succeeded. It fails when any of the first
// three is not 0, an unknown's outcome is not recorded, the unavailable
// stretch exceeds the fencing bound (DeadAfter, 6 s) plus 10 s, or the
// cluster does not serve again by itself after a fault; it prints a table
// (BENCHMARKS.md, issue 36) and the evidence of each breach.
//
// EDGEAIP_CHAOS_CLUSTER=all runs every fault, a round of them in about 5
// minutes; a comma-separated list of their names runs those.
// EDGEAIP_CHAOS_ROUNDS (default 2) is how many rounds: each phase finds
// the node holding the most devices again.
func TestClusterChaos(t *testing.T) {
	faults, rounds := chaosFaultsToRun(t), chaosRounds(t)
	cc := newChaosCluster(t)
	since, ok := cc.waitServing(chaosRecoverBound)
	require.True(t, ok, "the cluster did not serve within %s of its start", chaosRecoverBound)
	t.Logf("3 nodes and %d agents serving %s after their start", chaosDevices, since.Round(time.Millisecond))
	var phases []*chaosPhase
	for round := range rounds {
		for _, f := range faults {
			phases = append(phases, cc.run(f, fmt.Sprintf("%s.%d", f.name, round+1)))
		}
	}
	tallies := make([]chaosTally, len(phases))
	for i, p := range phases {
		tallies[i] = cc.tally(p)
	}
	t.Log("\n" + chaosTable(tallies))
	for i, p := range phases {
		cc.check(p, tallies[i])
	}
}

// The chaos run's dimensions. The load is open: a command starts every
// 1/chaosRate s whatever became of the others, so that callers stuck on a
// fault never starve the rest of the cluster of work, and unavailability
// is the cluster's, not the load generator's.
const (
	chaosNodes   = 3
	chaosDevices = 15
	chaosRate    = 10 // commands a second
	// chaosTimeout is each command's timeout.
	chaosTimeout = "10s"
	// chaosPreparationWait is how much longer than its timeout a caller
	// waits for a command whose device prepares its tool.
	chaosPreparationWait = 5 * time.Second
	// chaosRetryFor is how long a caller keeps repeating a command whose
	// node was away, refused it, or left its outcome unknown.
	chaosRetryFor = 45 * time.Second
	// chaosFencingBound is DeadAfter, the time after which a silent node
	// is taken as dead (server/internal/cluster): the cluster may be
	// unavailable that long plus chaosUnavailableSlack.
	chaosFencingBound     = 6 * time.Second
	chaosUnavailableSlack = 10 * time.Second
	// chaosRecoverBound is how long after a fault heals every node must
	// serve again and every device be linked to a live node.
	chaosRecoverBound = 60 * time.Second
	// chaosBefore and chaosAfter are the load before a fault and after
	// the cluster serves again.
	chaosBefore = 5 * time.Second
	chaosAfter  = 5 * time.Second
)

// chaosFault is one fault: its name (for CHAOS_FAULTS), whether it
// strikes a node, what it does (for the log), and inject, which brings it
// on node n (-1 for a fault of the cluster's) and heals it, returning once
// it has healed.
type chaosFault struct {
	name    string
	onANode bool
	summary string
	inject  func(cc *chaosCluster, n int)
}

// chaosFaults are issue 36's faults, in the order a round runs them.
var chaosFaults = []chaosFault{
	{name: "kill-9", onANode: true, summary: "SIGKILL; started again once taken as dead",
		inject: func(cc *chaosCluster, n int) {
			cc.nodes[n].kill(cc.t)
			cc.waitTakenAsDead(n)
			cc.startAgain(n)
		}},
	{name: "sigstop", onANode: true, summary: "SIGSTOP for 15 s, then SIGCONT",
		inject: func(cc *chaosCluster, n int) {
			p := cc.nodes[n].cmd.Process
			require.NoError(cc.t, p.Signal(syscall.SIGSTOP))
			time.Sleep(15 * time.Second)
			require.NoError(cc.t, p.Signal(syscall.SIGCONT))
		}},
	{name: "nats-partition", onANode: true, summary: "its link to NATS drops everything for 20 s",
		inject: func(cc *chaosCluster, n int) {
			cc.toNATS[n].Cut()
			time.Sleep(20 * time.Second)
			cc.toNATS[n].Heal()
		}},
	{name: "pg-partition", onANode: true, summary: "its link to PostgreSQL drops everything for 20 s",
		inject: func(cc *chaosCluster, n int) {
			cc.toPG[n].Cut()
			time.Sleep(20 * time.Second)
			cc.toPG[n].Heal()
		}},
	{name: "pg-outage", summary: "PostgreSQL stopped -m immediate for 10 s, then started",
		inject: func(cc *chaosCluster, _ int) {
			require.NoError(cc.t, cc.pg.Kill())
			time.Sleep(10 * time.Second)
			require.NoError(cc.t, cc.pg.Start())
		}},
	{name: "rolling-restart", summary: "SIGTERM (drain) of each node in turn, started again once it exits",
		inject: func(cc *chaosCluster, _ int) {
			for n := range cc.nodes {
				cc.stopAndStartAgain(n)
			}
		}},
}

// chaosRounds is EDGEAIP_CHAOS_ROUNDS, 2 if not set.
func chaosRounds(t *testing.T) int {
	v := os.Getenv("EDGEAIP_CHAOS_ROUNDS")
	if v == "" {
		return 2
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "EDGEAIP_CHAOS_ROUNDS")
	require.Positive(t, n, "EDGEAIP_CHAOS_ROUNDS")
	return n
}

// chaosFaultsToRun is the faults EDGEAIP_CHAOS_CLUSTER names ("all", or
// names separated by commas), in chaosFaults' order; it skips t if it is
// not set.
func chaosFaultsToRun(t *testing.T) []chaosFault {
	want := os.Getenv("EDGEAIP_CHAOS_CLUSTER")
	if want == "" {
		t.Skip("make chaos-cluster runs this (EDGEAIP_CHAOS_CLUSTER=all, or fault names separated by commas)")
	}
	names := strings.Split(want, ",")
	var faults []chaosFault
	for _, f := range chaosFaults {
		if want == "all" || slices.Contains(names, f.name) {
			faults = append(faults, f)
		}
	}
	if len(faults) == 0 {
		var all []string
		for _, f := range chaosFaults {
			all = append(all, f.name)
		}
		t.Fatalf("EDGEAIP_CHAOS_CLUSTER=%q names no fault: want all, or some of %s", want, strings.Join(all, ","))
	}
	return faults
}

// chaosCluster is the nodes, PostgreSQL, NATS and agents of the chaos run.
// Only the test's own goroutine changes nodes (a restart replaces one);
// the load calls the nodes through apis, one client per node address,
// which restarts keep.
type chaosCluster struct {
	t       *testing.T
	bin     string
	pg      *pgtest.Cluster
	nodes   []*serverProcess
	past    []*serverProcess // processes stopped, for their logs
	apis    []*api.Client
	toNATS  []*blackhole.Proxy // each node's link to NATS
	toPG    []*blackhole.Proxy // each node's link to PostgreSQL
	dsn     string             // the store, straight, for what the API does not show
	files   string             // dev-NN/ for each device, mounted on it
	devs    []string
	ops     []*chaosOp // of every phase so far
	unended []string   // tasks a phase left running
}

// newChaosCluster starts PostgreSQL, NATS, the three nodes, each behind a
// proxy of its own to each, and the agents.
func newChaosCluster(t *testing.T) *chaosCluster {
	cc := &chaosCluster{t: t, bin: testenv.Command(t, "aip-server"), pg: pgtest.Start(t), files: t.TempDir()}
	cc.dsn = cc.pg.NewDatabase(t)
	socket, db := unixSocketOf(t, cc.dsn)
	nats, err := url.Parse(startNATS(t))
	require.NoError(t, err)
	var token []byte
	for i := range chaosNodes {
		cc.toNATS = append(cc.toNATS, blackhole.Start(t, nats.Host))
		cc.toPG = append(cc.toPG, blackhole.StartTo(t, "unix", socket))
		data := t.TempDir()
		if token != nil {
			require.NoError(t, os.WriteFile(filepath.Join(data, "admin.token"), token, 0o600))
		}
		p := startServerProcess(t, cc.bin, "127.0.0.1:0", data,
			"--store", fmt.Sprintf("postgres://aip@%s/%s?sslmode=disable", cc.toPG[i].Addr(), db),
			"--nats", "nats://"+cc.toNATS[i].Addr(), "--node-id", fmt.Sprintf("node-%d", i), "--device-grace", "30s")
		if token == nil {
			token, err = os.ReadFile(filepath.Join(data, "admin.token"))
			require.NoError(t, err)
		}
		cc.nodes = append(cc.nodes, p)
		// A caller waits for its command's timeout, chaosPreparationWait
		// and the client's reply time, not the 10 minutes the server may
		// hold a command whose tool is being prepared: the agents share a
		// compile cache, and a caller stuck on a node that does not answer
		// would hold the phase up for that long.
		cc.apis = append(cc.apis, &api.Client{BaseURL: p.api.BaseURL, Token: p.api.Token, PreparationWait: chaosPreparationWait})
	}
	cc.startAgents()
	return cc
}

// unixSocketOf is the path of the Unix socket and the database name of a
// pgtest database's URL.
func unixSocketOf(t *testing.T, dsn string) (socket, db string) {
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	q := u.Query()
	return filepath.Join(q.Get("host"), ".s.PGSQL."+q.Get("port")), strings.TrimPrefix(u.Path, "/")
}

// startAgents starts an in-process agent for each device, given every
// node's URL, with its own dir of files mounted.
func (cc *chaosCluster) startAgents() {
	tools := appendAndPause(cc.t)
	var urls []string
	for _, p := range cc.nodes {
		urls = append(urls, p.wsURL())
	}
	for i := range chaosDevices {
		id := fmt.Sprintf("dev-%02d", i)
		dir := filepath.Join(cc.files, id)
		require.NoError(cc.t, os.Mkdir(dir, 0o755))
		runAgent(cc.t, agent.Config{
			ID: id, ServerURLs: urls, TokenFile: cc.nodes[0].enroll(cc.t, id), DataDir: cc.t.TempDir(),
			ToolDirs: []string{"stock=" + tools}, CompileCacheDir: sharedCompileCache(cc.t),
			Mounts:        []sandbox.Mount{{HostPath: dir, GuestPath: dir}},
			ShutdownGrace: 500 * time.Millisecond, Logger: testLogger(),
		})
		cc.devs = append(cc.devs, id)
	}
}

// chaosPhase is one fault's run: when it began and healed, on which
// node, and every command of its load.
type chaosPhase struct {
	name              string // the fault's, and its round
	fault             chaosFault
	node              int // -1: none
	devicesThere      int // on node when the fault began
	loadFrom, loadTo  time.Time
	faultFrom, healed time.Time
	servingAgain      time.Duration // after healed; chaosRecoverBound+ if never
	serving           bool
	ops               []*chaosOp
	unended           []string // tasks still running chaosRecoverBound after it
}

// run runs one phase, name: load, the fault, the load until the cluster
// serves again and a little more, and every command's end.
func (cc *chaosCluster) run(f chaosFault, name string) *chaosPhase {
	p := &chaosPhase{name: name, fault: f, node: -1}
	if f.onANode {
		p.node, p.devicesThere = cc.busiest()
	}
	cc.t.Logf("%s: %s, node %d (%d devices)", name, f.summary, p.node, p.devicesThere)
	load := cc.startLoad(name)
	p.loadFrom = time.Now()
	time.Sleep(chaosBefore)
	p.faultFrom = time.Now()
	f.inject(cc, p.node)
	p.healed = time.Now()
	p.servingAgain, p.serving = cc.waitServing(chaosRecoverBound)
	if !p.serving {
		cc.t.Logf("%s: the cluster did not serve again within %s: %s", name, chaosRecoverBound, cc.health())
		cc.restartUnhealthy()
	}
	time.Sleep(chaosAfter)
	p.loadTo = time.Now()
	p.ops = load.stop()
	cc.t.Logf("%s: %d commands, fault %s, serving again %s after it healed; the last command ended %s after the load stopped",
		name, len(p.ops), p.healed.Sub(p.faultFrom).Round(100*time.Millisecond),
		p.servingAgain.Round(100*time.Millisecond), time.Since(p.loadTo).Round(100*time.Millisecond))
	cc.t.Logf("%s: what callers were told, other than success:\n%s", name, answerKinds(p.ops))
	cc.t.Logf("%s: what the nodes logged of their leases:\n%s", name, cc.membership(p.loadFrom))
	cc.ops = append(cc.ops, p.ops...)
	p.unended = cc.settle(p.faultFrom)
	return p
}

// busiest is the node holding the most devices' links, and how many.
func (cc *chaosCluster) busiest() (node, devices int) {
	view, err := cc.view()
	require.NoError(cc.t, err)
	count := make([]int, len(cc.nodes))
	for _, l := range view.Leases {
		var n int
		if _, err := fmt.Sscanf(l.NodeID, "node-%d", &n); err == nil && n < len(count) {
			count[n]++
		}
	}
	for n, c := range count {
		if c > count[node] {
			node = n
		}
	}
	return node, count[node]
}

// view is the cluster as the first node that answers sees it.
func (cc *chaosCluster) view() (api.Cluster, error) {
	var view api.Cluster
	var err error
	for _, c := range cc.apis {
		if err = c.Do(context.Background(), "GET", "/api/cluster", nil, &view); err == nil {
			return view, nil
		}
	}
	return view, err
}

// serving reports whether every node's /api/health is 200 and every
// device is linked to a live node.
func (cc *chaosCluster) serving() bool {
	if cc.health() != "" {
		return false
	}
	view, err := cc.view()
	if err != nil {
		return false
	}
	linked := 0
	for _, l := range view.Leases {
		if l.NodeID != "" && l.HolderAlive {
			linked++
		}
	}
	return linked == len(cc.devs)
}

// health is what each node that is not healthy says, or "".
func (cc *chaosCluster) health() string {
	var ill []string
	for n, c := range cc.apis {
		var h api.Health
		if err := c.Do(context.Background(), "GET", "/api/health", nil, &h); err != nil {
			ill = append(ill, fmt.Sprintf("node-%d: %v", n, err))
		}
	}
	return strings.Join(ill, "; ")
}

// waitServing waits up to bound for the cluster to serve, and returns how
// long it took, and whether it did.
func (cc *chaosCluster) waitServing(bound time.Duration) (time.Duration, bool) {
	return within(bound, cc.serving)
}

// waitTakenAsDead waits until the others take node n as dead, which
// they do once its heartbeat is DeadAfter old (it may start again only
// then), and every device is linked to a live node: a killed node's
// devices went to the others.
func (cc *chaosCluster) waitTakenAsDead(n int) {
	gone := fmt.Sprintf("node-%d", n)
	require.Eventually(cc.t, func() bool {
		view, err := cc.view()
		if err != nil || slices.ContainsFunc(view.Nodes, func(node api.ClusterNode) bool { return node.ID == gone && node.Alive }) {
			return false
		}
		linked := 0
		for _, l := range view.Leases {
			if l.NodeID != gone && l.NodeID != "" && l.HolderAlive {
				linked++
			}
		}
		return linked == len(cc.devs)
	}, chaosRecoverBound, 100*time.Millisecond, "%s was not taken as dead, or its devices did not move to the other nodes", gone)
}

// startAgain starts node n again, on its address and data dir, after its
// process ended.
func (cc *chaosCluster) startAgain(n int) {
	old := cc.nodes[n]
	cc.past = append(cc.past, old)
	data := old.cmd.Args[4] // --listen ADDR --data DIR
	cc.nodes[n] = startServerProcess(cc.t, cc.bin, old.addr, data, old.cmd.Args[5:]...)
}

// stopAndStartAgain stops node n with SIGTERM, which drains it, starts it
// again, and waits until it is healthy.
func (cc *chaosCluster) stopAndStartAgain(n int) {
	old := cc.nodes[n]
	require.NoError(cc.t, old.cmd.Process.Signal(syscall.SIGTERM))
	err := old.cmd.Wait()
	<-old.done
	require.NoError(cc.t, err, "node-%d stopped on SIGTERM: %s", n, old.logs.String())
	cc.startAgain(n)
	require.Eventually(cc.t, func() bool {
		return cc.apis[n].Do(context.Background(), "GET", "/api/health", nil, nil) == nil
	}, chaosRecoverBound, 100*time.Millisecond, "node-%d did not serve after its restart", n)
}

// restartUnhealthy kills and starts again each node that does not serve,
// so that the next phase has three: what a fault left broken is reported
// by its phase.
func (cc *chaosCluster) restartUnhealthy() {
	for n, c := range cc.apis {
		if c.Do(context.Background(), "GET", "/api/health", nil, nil) != nil {
			cc.t.Logf("restarting node-%d by hand", n)
			cc.nodes[n].kill(cc.t)
			cc.startAgain(n)
		}
	}
	if _, ok := cc.waitServing(chaosRecoverBound); !ok {
		cc.t.Fatalf("the cluster does not serve even after a restart by hand: %s", cc.health())
	}
}

// settle waits until the store holds no task still to end, but those
// found so before, up to chaosRecoverBound: the late outcomes of a phase
// are in before the next. It returns the tasks that did not end, and logs
// the evidence of the commands that started them, since the fault began
// at faultFrom.
func (cc *chaosCluster) settle(faultFrom time.Time) []string {
	var open []api.TaskSummary
	_, ok := within(chaosRecoverBound, func() bool {
		open = nil
		for _, state := range []api.TaskState{api.StateCreated, api.StateRunning} {
			page, err := cc.apis[0].TaskPage(context.Background(), api.TaskQuery{State: state, Limit: api.MaxTaskPage})
			if err != nil {
				return false
			}
			for _, sum := range page.Tasks {
				if !slices.Contains(cc.unended, sum.SessionID) {
					open = append(open, sum)
				}
			}
		}
		return len(open) == 0
	})
	if ok {
		return nil
	}
	cc.t.Logf("%d tasks not ended %s after the phase, such as:", len(open), chaosRecoverBound)
	var ids []string
	for k, sum := range open {
		ids = append(ids, sum.SessionID)
		i := slices.IndexFunc(cc.ops, func(op *chaosOp) bool { return slices.Contains(op.sessions, sum.SessionID) })
		switch {
		case k >= 3:
		case i < 0:
			cc.t.Logf("  task %s (owner %s) on %s, %s since %s, named in no answer", sum.SessionID, cc.owner(sum.SessionID),
				sum.DeviceID, sum.State, sum.CreatedAt.Format(time.StampMilli))
		default:
			cc.t.Logf("  task %s, of %s:\n%s", sum.SessionID, cc.ops[i].id, cc.evidence(faultFrom, cc.ops[i]))
		}
	}
	cc.unended = append(cc.unended, ids...)
	return ids
}

// within polls cond every 100 ms until it holds or bound passes, and
// returns how long it waited and whether cond held.
func within(bound time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for !cond() {
		if time.Since(start) > bound {
			return time.Since(start), false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start), true
}

// membership is what the nodes logged of their leases since from:
// deaths, losses, joins, adoptions, heartbeats failing and recorded again.
func (cc *chaosCluster) membership(from time.Time) string {
	var b strings.Builder
	for _, proc := range cc.processes() {
		for _, line := range strings.Split(proc.logs.String(), "\n") {
			m := membershipEvent.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			if at, err := time.Parse(time.RFC3339Nano, m[1]); err == nil && at.After(from) {
				fmt.Fprintf(&b, "  %+.1fs node-%d: %s\n", at.Sub(from).Seconds(), cc.nodeOf(proc), line[min(len(line), len(m[0])-len(m[2])):])
			}
		}
	}
	return b.String()
}

// membershipEvent is a log line of a node's lease, its time and its message.
var membershipEvent = regexp.MustCompile(`^time=(\S+) level=\S+ (msg="(node found dead|this node lost its lease|rejoined the cluster|joined the cluster|heartbeat failed|heartbeat recorded again|adopted the sessions))`)

// nodeOf is the number of the node proc is or was.
func (cc *chaosCluster) nodeOf(proc *serverProcess) int {
	return slices.IndexFunc(cc.apis, func(c *api.Client) bool { return strings.HasSuffix(c.BaseURL, "//"+proc.addr) })
}

// processes is every node process the run started, stopped ones first.
func (cc *chaosCluster) processes() []*serverProcess {
	return append(slices.Clone(cc.past), cc.nodes...)
}
