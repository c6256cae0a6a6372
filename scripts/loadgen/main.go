// Command loadgen measures aip-server under load, on loopback only, and
// prints what BENCHMARKS.md records. It starts each server it is given
// (-bin NAME=PATH [FLAG...], repeatable) afresh for every run, with a
// temporary data dir, and runs them in turn, round after round, so that
// servers compared are measured side by side under the same load; it
// prints every run and the median of each figure per server.
//
//	loadgen commands  simulated devices that answer at once, and operators
//	                  calling POST /api/devices/{id}/commands: commands/s,
//	                  p50 and p99 latency, server CPU per command
//	loadgen idle      many registered links, idle: server memory per link,
//	                  idle CPU, bytes on the wire per link per day
//	loadgen rollout   simulated devices that keep modules and apply
//	                  revisions as the agent does: the time for a new
//	                  revision to reach every device, and the server's CPU
//	                  per device against a hand deploy's (-deploys of them)
//
// Everything is bounded: by -duration or -count for commands, by -links
// and -window for idle links. Idle links come from one epoll reader, with
// no goroutine per link, from several loopback source addresses; raise
// the open-files limit (ulimit -n) in the shell that runs it. Linux only:
// it reads the server's CPU and memory from /proc.
//
// With -floor, the commands mode also measures what aip-server cannot go
// below: two servers, loadgen itself started as a server, that answer the
// same calls with net/http and coder/websocket alone (floor.go).
//
// With -pg, each run of a server gets a fresh database on that PostgreSQL
// server as its --store; with -nats too, its nodes run as cluster nodes,
// and -nodes NAME=N runs N of server NAME, sharing them: the commands
// mode then links device i to node i mod N and sends each caller's
// commands through the nodes in turn, the idle mode links link i to node
// i mod N (and with -kill, kills the last node after the window and times
// its devices registering again on the others), and both sum the nodes'
// CPU and memory. -store NAME=sqlite|postgres|cluster keeps server NAME
// on SQLite in its data dir, on -pg without NATS, or on both, whatever
// the others use, so that one run compares the stores side by side.
// With -pg-pid (the PostgreSQL server's postmaster), the commands mode
// also reports the database's side of each command on PostgreSQL: its
// processes' CPU, and its WAL syncs and transactions from
// pg_stat_wal and pg_stat_database.
// scripts/loadgen-cluster.sh starts a throwaway PostgreSQL and a NATS
// server for it, and passes -pg, -nats and -pg-pid.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if isFloorServe(os.Args) {
		if err := floorServe(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen floor server:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) < 2 || !slices.Contains([]string{"commands", "idle", "rollout"}, os.Args[1]) {
		fmt.Fprintln(os.Stderr, "usage: loadgen commands|idle|rollout -bin NAME=PATH [FLAG...] [-bin ...] [options]; loadgen MODE -h for options")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet("loadgen "+mode, flag.ExitOnError)
	var bins []serverBin
	fs.Func("bin", "a server to measure, NAME=PATH [FLAG...] (repeatable)", func(v string) error {
		b, err := parseBin(v)
		bins = append(bins, b)
		return err
	})
	pprof := map[string]string{}
	fs.Func("pprof", "NAME=URL: where server NAME serves /debug/pprof/, if not on its own address", func(v string) error {
		name, url, ok := strings.Cut(v, "=")
		if !ok {
			return fmt.Errorf("want NAME=URL")
		}
		pprof[name] = url
		return nil
	})
	nodes := map[string]int{}
	fs.Func("nodes", "NAME=N: run server NAME as N cluster nodes (needs -pg and -nats)", func(v string) error {
		name, n, ok := strings.Cut(v, "=")
		k, err := strconv.Atoi(n)
		if !ok || err != nil || k < 1 {
			return fmt.Errorf("want NAME=N, N ≥ 1")
		}
		nodes[name] = k
		return nil
	})
	stores := map[string]storeKind{}
	fs.Func("store", "NAME=sqlite|postgres|cluster: where server NAME keeps its data, whatever -pg and -nats give the others", func(v string) error {
		name, kind, ok := strings.Cut(v, "=")
		if !ok || !slices.Contains(storeKinds, storeKind(kind)) {
			return fmt.Errorf("want NAME=sqlite|postgres|cluster")
		}
		stores[name] = storeKind(kind)
		return nil
	})
	var cl clusterConfig
	fs.IntVar(&cl.pgPID, "pg-pid", 0, "commands: PID of the -pg server's postmaster, to report the database's CPU, WAL syncs and transactions per command")
	fs.StringVar(&cl.pg, "pg", "", "URL of a database on a PostgreSQL server: each run gets a fresh database there as its --store")
	fs.StringVar(&cl.nats, "nats", "", "NATS server URL: run every server's nodes as cluster nodes (needs -pg)")
	rounds := fs.Int("rounds", 3, "rounds; each runs every server once, in turn")
	var cc commandsConfig
	fs.IntVar(&cc.devices, "devices", 64, "commands: simulated devices")
	fs.IntVar(&cc.callers, "callers", 64, "commands: concurrent operators")
	fs.DurationVar(&cc.warmup, "warmup", 2*time.Second, "commands: unmeasured run first")
	fs.DurationVar(&cc.duration, "duration", 10*time.Second, "commands: measured run")
	fs.IntVar(&cc.maxCommands, "count", 0, "commands: stop the measured run after this many commands (0: -duration only)")
	fs.BoolVar(&cc.keys, "keys", false, "commands: send an Idempotency-Key with each, as aipctl and the Go client do")
	fs.StringVar(&cc.profileDir, "profile", "", "commands: keep a CPU profile of each measured run in this dir")
	floorToo := fs.Bool("floor", false, "commands: measure the floor servers too, floor-http and floor-ws (floor.go)")
	var ic idleConfig
	fs.IntVar(&ic.links, "links", 1000, "idle: links")
	fs.DurationVar(&ic.settle, "settle", 10*time.Second, "idle: wait after the last link registered before reading memory")
	fs.DurationVar(&ic.window, "window", 2*time.Minute, "idle: how long the links stay idle while CPU and bytes are counted")
	fs.DurationVar(&ic.liveness.heartbeat, "device-heartbeat", 0, "idle: each device sends a HEARTBEAT this often (main's agent: 20s)")
	fs.DurationVar(&ic.liveness.pingEvery, "device-ping-every", 0, "idle: each device pings this often (main's agent: 15s)")
	fs.DurationVar(&ic.liveness.pingSilence, "device-ping-silence", 50*time.Second, "idle: each device pings after this long without a frame (this branch's agent: 50s)")
	fs.BoolVar(&ic.kill, "kill", false, "idle, cluster: then kill the last node and time its devices registering again on the others")
	fs.DurationVar(&ic.liveness.keepalive, "device-keepalive", 0, "idle: TCP keepalive of each device's socket (main's agent: 30s)")
	rc := rolloutConfig{}
	fs.IntVar(&rc.deploys, "deploys", 200, "rollout: devices a module is deployed to by hand, -callers at once, to compare the server's CPU per device")
	fs.StringVar(&rc.module, "module", "wasmtools/tools/hash_file/hash_file.wasm", "rollout: the tool module rolled out and deployed, in versions of its own")
	fs.Parse(os.Args[2:])
	rc.devices, rc.callers = cc.devices, cc.callers
	if *floorToo {
		fb, err := floorBins()
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
			os.Exit(1)
		}
		bins = append(bins, fb...)
	}
	if len(bins) == 0 {
		fmt.Fprintln(os.Stderr, "loadgen: no -bin given")
		os.Exit(2)
	}
	if cl.nats != "" && cl.pg == "" {
		fmt.Fprintln(os.Stderr, "loadgen: -nats needs -pg (cluster mode needs a PostgreSQL store)")
		os.Exit(2)
	}
	for i := range bins {
		bins[i].pprof = pprof[bins[i].name]
		bins[i].nodes = nodes[bins[i].name]
		bins[i].store = stores[bins[i].name]
	}
	work, err := os.MkdirTemp("", "edgeaip-loadgen-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(work)
	printSetting(mode, bins, *rounds)
	ctx := context.Background()
	switch mode {
	case "commands":
		err = commandRounds(ctx, bins, work, cl, cc, *rounds)
	case "idle":
		err = idleRounds(ctx, bins, work, cl, ic, *rounds)
	case "rollout":
		err = rolloutRounds(ctx, bins, work, cl, rc, *rounds)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func printSetting(mode string, bins []serverBin, rounds int) {
	fmt.Printf("loadgen %s, %d rounds, %s\n", mode, rounds, time.Now().Format(time.DateTime))
	for _, b := range bins {
		fmt.Printf("  %s: %s %s (%d node(s))\n", b.name, b.path, strings.Join(b.args, " "), max(b.nodes, 1))
	}
	fmt.Printf("  load average at start: %s\n", loadAverage())
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// column is one figure of a run, as a table shows it.
type column[R any] struct {
	name   string
	value  func(R) float64
	format func(float64) string
}

// inRounds runs each server once per round, in order on even rounds and
// in reverse on odd ones, so that neither always goes first; it prints a
// row of columns per run, then a row of their medians per server.
func inRounds[R any](bins []serverBin, rounds int, columns []column[R], run func(b serverBin, round int) (R, error)) error {
	header(append([]string{"server", "round"}, append(names(columns), "load")...))
	runs := map[string][]R{}
	for r := range rounds {
		order := slices.Clone(bins)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, b := range order {
			res, err := run(b, r)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", b.name, r+1, err)
			}
			runs[b.name] = append(runs[b.name], res)
			cells := []string{b.name, fmt.Sprint(r + 1)}
			for _, c := range columns {
				cells = append(cells, c.format(c.value(res)))
			}
			row(append(cells, loadAverage()))
		}
	}
	fmt.Println("\nmedians:")
	header(append([]string{"server"}, names(columns)...))
	for _, b := range bins {
		cells := []string{b.name}
		for _, c := range columns {
			cells = append(cells, c.format(median(runs[b.name], c.value)))
		}
		row(cells)
	}
	return nil
}

func names[R any](columns []column[R]) []string {
	out := make([]string, len(columns))
	for i, c := range columns {
		out[i] = c.name
	}
	return out
}

func header(cells []string) {
	row(cells)
	fmt.Println("|" + strings.Repeat("---|", len(cells)))
}

func row(cells []string) { fmt.Println("| " + strings.Join(cells, " | ") + " |") }

func commandRounds(ctx context.Context, bins []serverBin, work string, cl clusterConfig, cfg commandsConfig, rounds int) error {
	fmt.Printf("  %d devices answering at once, %d callers, %s measured after %s warm-up\n\n",
		cfg.devices, cfg.callers, cfg.duration, cfg.warmup)
	micros := func(v float64) string { return us(time.Duration(v)) }
	columns := []column[commandsRun]{
		{"commands", func(r commandsRun) float64 { return float64(r.commands) }, func(v float64) string { return fmt.Sprintf("%.0f", v) }},
		{"commands/s", commandsRun.perSecond, func(v float64) string { return fmt.Sprintf("%.0f", v) }},
		{"p50", func(r commandsRun) float64 { return float64(r.p50) }, micros},
		{"p99", func(r commandsRun) float64 { return float64(r.p99) }, micros},
		{"server CPU/command", func(r commandsRun) float64 { return float64(r.cpuPerCommand()) }, micros},
	}
	if cl.pgPID != 0 {
		columns = append(columns, dbColumns()...)
	}
	return inRounds(bins, rounds, columns, func(b serverBin, round int) (commandsRun, error) {
		return runCommands(ctx, b, work, cl, cfg, round)
	})
}

func idleRounds(ctx context.Context, bins []serverBin, work string, cl clusterConfig, cfg idleConfig, rounds int) error {
	l := cfg.liveness
	fmt.Printf("  %d idle links; devices: heartbeat %s, ping every %s, ping after %s silent, TCP keepalive %s; %s idle\n\n",
		cfg.links, l.heartbeat, l.pingEvery, l.pingSilence, l.keepalive, cfg.window)
	kib := func(v float64) string { return fmt.Sprintf("%.1f KiB", v) }
	columns := []column[idleRun]{
		{"RSS/link registered", func(r idleRun) float64 { return r.kibPerLink(r.rssLinked) }, kib},
		{"RSS/link after idle", func(r idleRun) float64 { return r.kibPerLink(r.rssIdle) }, kib},
		{"idle CPU (of a core)", func(r idleRun) float64 { return 100 * r.cpuShare() }, func(v float64) string { return fmt.Sprintf("%.2f %%", v) }},
		{"bytes/link/day", func(r idleRun) float64 { return r.bytesPerLinkDay() / 1000 }, func(v float64) string { return fmt.Sprintf("%.0f KB", v) }},
		{"dropped", func(r idleRun) float64 { return float64(r.dropped) }, func(v float64) string { return fmt.Sprintf("%.0f", v) }},
	}
	if cfg.kill {
		columns = append(columns, column[idleRun]{"registered again after a kill", func(r idleRun) float64 { return r.rejoin.Seconds() },
			func(v float64) string { return fmt.Sprintf("%.2f s", v) }})
	}
	return inRounds(bins, rounds, columns, func(b serverBin, _ int) (idleRun, error) {
		return runIdle(ctx, b, work, cl, cfg)
	})
}

func rolloutRounds(ctx context.Context, bins []serverBin, work string, cl clusterConfig, cfg rolloutConfig, rounds int) error {
	fmt.Printf("  %d devices, a revision of %s; then %d hand deploys, %d at once\n\n", cfg.devices, cfg.module, cfg.deploys, cfg.callers)
	secs := func(v float64) string { return fmt.Sprintf("%.1f s", time.Duration(v).Seconds()) }
	micros := func(v float64) string { return us(time.Duration(v)) }
	columns := []column[rolloutRun]{
		{"first revision, all devices", func(r rolloutRun) float64 { return float64(r.first) }, secs},
		{"new revision, all devices", func(r rolloutRun) float64 { return float64(r.wall) }, secs},
		{"server CPU/device", func(r rolloutRun) float64 { return float64(r.cpuPerDevice()) }, micros},
		{"server CPU/deploy", func(r rolloutRun) float64 { return float64(r.cpuPerDeploy()) }, micros},
		{"ratio", func(r rolloutRun) float64 { return float64(r.cpuPerDevice()) / float64(max(r.cpuPerDeploy(), 1)) },
			func(v float64) string { return fmt.Sprintf("%.2f", v) }},
	}
	return inRounds(bins, rounds, columns, func(b serverBin, _ int) (rolloutRun, error) {
		return runRollout(ctx, b, work, cl, cfg)
	})
}

func median[T any](xs []T, f func(T) float64) float64 {
	vs := make([]float64, len(xs))
	for i, x := range xs {
		vs[i] = f(x)
	}
	slices.Sort(vs)
	if len(vs) == 0 {
		return 0
	}
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d.Nanoseconds())/1e3) }
