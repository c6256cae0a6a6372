package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// clusterConfig is where a server's store and its nodes' NATS are, if not
// in its data dir and nowhere: with pg set, each run of a server gets a
// fresh database on that PostgreSQL server (its --store), dropped after
// the run; with nats set too, each of its nodes is started as a cluster
// node (--nats, --node-id). pgPID is the PostgreSQL server's postmaster,
// if known, whose processes' CPU and statistics are then reported.
type clusterConfig struct {
	pg    string // URL of a database on the server, for CREATE DATABASE
	nats  string
	pgPID int
}

// storeKind is where a server keeps its data, overriding clusterConfig's
// default for one server (-store).
type storeKind string

// The store kinds: a SQLite file in the data dir, a PostgreSQL database
// with a single node, and PostgreSQL with the nodes on NATS.
const (
	storeSQLite   storeKind = "sqlite"
	storePostgres storeKind = "postgres"
	storeCluster  storeKind = "cluster"
)

var storeKinds = []storeKind{storeSQLite, storePostgres, storeCluster}

// of is c as a server kept in kind uses it: without PostgreSQL and NATS on
// SQLite, without NATS on PostgreSQL alone; unchanged for cluster or "".
func (c clusterConfig) of(kind storeKind) clusterConfig {
	switch kind {
	case storeSQLite:
		c.pg, c.nats = "", ""
	case storePostgres:
		c.nats = ""
	}
	return c
}

// fleet is the nodes of one server under measurement: one aip-server,
// or several cluster nodes sharing a database and NATS.
type fleet struct {
	nodes []*server
	cfg   clusterConfig
	db    string // the run's database, dropped by stop; "" on SQLite
}

// databases numbers the runs' databases.
var databases atomic.Int64

// startFleet starts bin's nodes, each with a fresh data dir in work and
// node 1's operator token, and enrolls n devices through node 1,
// returning their tokens in order (deviceID).
func startFleet(ctx context.Context, bin serverBin, work string, cfg clusterConfig, n int) (*fleet, []string, error) {
	cfg = cfg.of(bin.store)
	switch {
	case (bin.nodes > 1 || bin.store == storeCluster) && (cfg.pg == "" || cfg.nats == ""):
		return nil, nil, fmt.Errorf("%s: cluster nodes need -pg and -nats", bin.name)
	case bin.store == storePostgres && cfg.pg == "":
		return nil, nil, fmt.Errorf("%s: -store postgres needs -pg", bin.name)
	}
	f := &fleet{cfg: cfg}
	args := bin.args
	if cfg.pg != "" {
		store, err := f.createDatabase(ctx, fmt.Sprintf("loadgen_%d_%d", os.Getpid(), databases.Add(1)))
		if err != nil {
			return nil, nil, err
		}
		args = append(args[:len(args):len(args)], "--store", store)
	}
	for i := range max(bin.nodes, 1) {
		nodeArgs := args
		if cfg.nats != "" {
			nodeArgs = append(args[:len(args):len(args)], "--nats", cfg.nats, "--node-id", fmt.Sprintf("%s-%d", bin.name, i+1))
		}
		token := ""
		if i > 0 {
			token = filepath.Join(f.nodes[0].data, "admin.token")
		}
		s, err := startNode(ctx, bin.path, nodeArgs, work, token)
		if err != nil {
			f.stop()
			return nil, nil, fmt.Errorf("%s node %d: %w", bin.name, i+1, err)
		}
		f.nodes = append(f.nodes, s)
	}
	tokens, err := f.nodes[0].enroll(ctx, n)
	if err != nil {
		f.stop()
		return nil, nil, err
	}
	return f, tokens, nil
}

// createDatabase creates database name on cfg.pg's server and returns its
// URL.
func (f *fleet) createDatabase(ctx context.Context, name string) (string, error) {
	if err := pgAdmin(ctx, f.cfg.pg, `CREATE DATABASE "`+name+`"`); err != nil {
		return "", err
	}
	f.db = name
	u, err := url.Parse(f.cfg.pg)
	if err != nil {
		return "", fmt.Errorf("-pg %q: %w", f.cfg.pg, err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// pgAdmin runs one statement on the database at dsn.
func pgAdmin(ctx context.Context, dsn, stmt string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("-pg: %s: %w", stmt, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("-pg: %s: %w", stmt, err)
	}
	return nil
}

// stop ends every node at once (a cluster node drains on SIGTERM), removes
// their data and drops the run's database.
func (f *fleet) stop() {
	var wg sync.WaitGroup
	for _, s := range f.nodes {
		wg.Go(s.stop)
	}
	wg.Wait()
	if f.db != "" {
		if err := pgAdmin(context.Background(), f.cfg.pg, `DROP DATABASE IF EXISTS "`+f.db+`" WITH (FORCE)`); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
		}
	}
}

// cpu is the CPU time the nodes have used, summed.
func (f *fleet) cpu() (time.Duration, error) { return sumNodes(f, (*server).cpu) }

// rssKiB is the nodes' resident memory, summed.
func (f *fleet) rssKiB() (int64, error) { return sumNodes(f, (*server).rssKiB) }

func sumNodes[T time.Duration | int64](f *fleet, read func(*server) (T, error)) (T, error) {
	var sum T
	var errs []error
	for _, s := range f.nodes {
		v, err := read(s)
		sum += v
		errs = append(errs, err)
	}
	return sum, errors.Join(errs...)
}
