package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// statsSettle is how long loadgen waits before reading PostgreSQL's
// statistics: a backend flushes what it counted at most once a second
// while busy, and within 10 s of going idle (PGSTAT_IDLE_INTERVAL).
const statsSettle = 11 * time.Second

// dbCounters are the counters of the database's side of a run that
// PostgreSQL keeps.
type dbCounters struct {
	syncs int64 // WAL syncs, by any process (pg_stat_wal.wal_sync)
	xacts int64 // transactions in the run's database, committed or not
}

// readDBCounters waits statsSettle, then reads the counters of database
// db on cfg.pg's server.
func readDBCounters(ctx context.Context, cfg clusterConfig, db string) (dbCounters, error) {
	select {
	case <-ctx.Done():
		return dbCounters{}, ctx.Err()
	case <-time.After(statsSettle):
	}
	conn, err := pgx.Connect(ctx, cfg.pg)
	if err != nil {
		return dbCounters{}, fmt.Errorf("-pg: statistics: %w", err)
	}
	defer conn.Close(context.Background())
	var c dbCounters
	err = conn.QueryRow(ctx, `SELECT (SELECT wal_sync FROM pg_stat_wal),
		(SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1)`, db).Scan(&c.syncs, &c.xacts)
	if err != nil {
		return dbCounters{}, fmt.Errorf("-pg: statistics of database %q: %w", db, err)
	}
	return c, nil
}

// postgresCPU is the CPU time the PostgreSQL server whose postmaster is
// pid has used: the postmaster's, its live children's (the backends and
// the auxiliary processes) and its ended children's.
func postgresCPU(pid int) (time.Duration, error) {
	pm, err := readStat(pid)
	if err != nil {
		return 0, fmt.Errorf("-pg-pid %d: %w", pid, err)
	}
	total := pm.cpu + pm.children
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, p := range procs {
		n, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		// A process that ended since the listing is in pm.children or
		// was not the postmaster's.
		if st, err := readStat(n); err == nil && st.ppid == pid {
			total += st.cpu
		}
	}
	return total, nil
}

// dbSide is the database's side of a run on PostgreSQL: its CPU over the
// measured part, and its counters over the warm-up and the measured part
// together, which counted commands.
type dbSide struct {
	cpu      time.Duration
	counted  dbCounters
	commands int
}

// dbMeter measures the database's side of a run on PostgreSQL; a nil
// one, of a run on SQLite or without -pg-pid, measures nothing.
type dbMeter struct {
	cfg      clusterConfig
	db       string
	counted0 dbCounters
	cpu0     time.Duration
	side     dbSide
}

// newDBMeter starts measuring the side of database db ("": none) on
// cfg's server, before the warm-up: nil if there is nothing to measure.
func newDBMeter(ctx context.Context, cfg clusterConfig, db string) (*dbMeter, error) {
	if db == "" || cfg.pgPID == 0 {
		return nil, nil
	}
	m := &dbMeter{cfg: cfg, db: db}
	var err error
	m.counted0, err = readDBCounters(ctx, cfg, db)
	return m, err
}

// measuredStarts and measuredEnds bound the measured part, whose CPU the
// database's side counts.
func (m *dbMeter) measuredStarts() (err error) {
	if m != nil {
		m.cpu0, err = postgresCPU(m.cfg.pgPID)
	}
	return err
}

func (m *dbMeter) measuredEnds() error {
	if m == nil {
		return nil
	}
	cpu1, err := postgresCPU(m.cfg.pgPID)
	m.side.cpu = cpu1 - m.cpu0
	return err
}

// result is the database's side of the run, whose warm-up and measured
// part made commands commands: nil if m is.
func (m *dbMeter) result(ctx context.Context, commands int) (*dbSide, error) {
	if m == nil {
		return nil, nil
	}
	c, err := readDBCounters(ctx, m.cfg, m.db)
	if err != nil {
		return nil, err
	}
	m.side.commands = commands
	m.side.counted = dbCounters{syncs: c.syncs - m.counted0.syncs, xacts: c.xacts - m.counted0.xacts}
	return &m.side, nil
}

// perCommand is n per command counted.
func (d dbSide) perCommand(n int64) float64 { return float64(n) / float64(max(d.commands, 1)) }

// dbColumns are the commands table's columns of the database's side,
// per command; a run on SQLite has none ("–").
func dbColumns() []column[commandsRun] {
	onPostgres := func(get func(commandsRun) float64) func(commandsRun) float64 {
		return func(r commandsRun) float64 {
			if r.db == nil {
				return math.NaN()
			}
			return get(r)
		}
	}
	orDash := func(format func(float64) string) func(float64) string {
		return func(v float64) string {
			if math.IsNaN(v) {
				return "–"
			}
			return format(v)
		}
	}
	ratio := orDash(func(v float64) string { return fmt.Sprintf("%.2f", v) })
	return []column[commandsRun]{
		{"database CPU/command", onPostgres(func(r commandsRun) float64 { return float64(r.db.cpu / time.Duration(max(r.commands, 1))) }),
			orDash(func(v float64) string { return us(time.Duration(v)) })},
		{"WAL syncs/command", onPostgres(func(r commandsRun) float64 { return r.db.perCommand(r.db.counted.syncs) }), ratio},
		{"transactions/command", onPostgres(func(r commandsRun) float64 { return r.db.perCommand(r.db.counted.xacts) }), ratio},
	}
}
