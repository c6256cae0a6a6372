// Package pgtest starts throwaway PostgreSQL clusters for tests, from the
// binaries of Debian's postgresql package (make deps installs it): one
// cluster per test binary, shared, with a fresh database per test, and
// clusters of a test's own for tests that stop and start theirs. A
// cluster listens on a Unix socket in its own directory, so clusters never
// compete for a port. A test skips, saying what is missing, where the
// binaries are not installed.
//
// PostgreSQL refuses to run as root: as root, the cluster runs as the
// postgres user the package creates. The postmaster is a child of the
// test binary and gets SIGQUIT (an immediate shutdown) if the binary dies
// before it stops it, by a timeout's panic say; Main stops the shared one
// and removes its files.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// binEnv names a directory of PostgreSQL's binaries to use instead of the
// newest of /usr/lib/postgresql/*/bin.
const binEnv = "EDGEAIP_PG_BIN"

// port is the port every cluster's socket is named for: each cluster has
// a socket directory of its own.
const port = 5432

// superuser is the role initdb creates, which tests connect as.
const superuser = "aip"

// Cluster is a running PostgreSQL cluster in a temporary directory.
type Cluster struct {
	bin  string              // directory of the binaries
	dir  string              // the socket directory; the data directory is dir/db
	cred *syscall.Credential // who the server runs as; nil: as we run

	mu   sync.Mutex
	cmd  *exec.Cmd // the postmaster, while it runs
	done chan struct{}
	dbs  atomic.Int64 // databases made, to name the next
}

var (
	sharedOnce sync.Once
	shared     *Cluster
	sharedErr  error
)

// Shared returns the test binary's cluster, starting it on first use; it
// skips t if PostgreSQL is not installed. Call Main from TestMain to stop
// it when the tests end.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = start() })
	check(t, sharedErr)
	return shared
}

// Main runs the tests and stops the shared cluster, if one was started.
// Use it as TestMain: func TestMain(m *testing.M) { pgtest.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	if shared != nil {
		if err := shared.remove(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
	}
	os.Exit(code)
}

// Start starts a cluster of t's own, removed when t ends; it skips t if
// PostgreSQL is not installed.
func Start(t testing.TB) *Cluster {
	t.Helper()
	c, err := start()
	check(t, err)
	t.Cleanup(func() {
		if err := c.remove(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return c
}

// errMissing is wrapped by the error of a machine without PostgreSQL.
var errMissing = errors.New("PostgreSQL is not installed")

func check(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, errMissing) {
		t.Skipf("%v (Debian's postgresql package; make deps installs it)", err)
	}
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
}

// Available reports whether clusters can be started here, and if not, why.
func Available() error {
	_, _, err := binaries()
	return err
}

// binaries finds PostgreSQL's binaries and who must run them.
func binaries() (string, *syscall.Credential, error) {
	bin := os.Getenv(binEnv)
	if bin == "" {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
		if len(dirs) == 0 {
			return "", nil, fmt.Errorf("%w: no /usr/lib/postgresql/*/bin, and %s is not set", errMissing, binEnv)
		}
		bin = dirs[0]
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		return "", nil, fmt.Errorf("%w: %v", errMissing, err)
	}
	if os.Geteuid() != 0 {
		return bin, nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return "", nil, fmt.Errorf("%w: running as root, and PostgreSQL refuses to: no postgres user to run it as: %v", errMissing, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return bin, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// version is the major version in a path /usr/lib/postgresql/N/bin.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func start() (*Cluster, error) {
	bin, cred, err := binaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "edgeaip-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir, cred: cred}
	if err := c.initdb(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := c.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

// initdb makes the cluster's data directory, with a superuser that needs
// no password on the socket, UTF-8 and the C collation (text sorts as its
// bytes, as in SQLite).
func (c *Cluster) initdb() error {
	if c.cred != nil {
		if err := os.Chown(c.dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return err
		}
	}
	cmd := c.command("initdb", "-D", c.dataDir(), "-A", "trust", "-U", superuser, "-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.dir, "db") }
func (c *Cluster) logFile() string { return filepath.Join(c.dir, "log") }

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	return cmd
}

// Start starts the cluster's server, stopped by Stop, and returns once it
// takes connections.
func (c *Cluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		return errors.New("pgtest: the cluster is running")
	}
	log, err := os.OpenFile(c.logFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := c.command("postgres", "-D", c.dataDir(), "-k", c.dir, "-p", strconv.Itoa(port), "-c", "listen_addresses=")
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	c.cmd, c.done = cmd, done
	return c.waitReady(done)
}

// waitReady waits until the server takes connections, or exits.
func (c *Cluster) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("pgtest: postgres exited: %v\n%s", err, c.Log())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres takes no connections after 30 s: %v\n%s", err, c.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop shuts the server down as pg_ctl stop does by default (fast:
// sessions are ended, with "terminating connection due to administrator
// command"), and returns once it has exited. The cluster keeps its data
// for Start.
func (c *Cluster) Stop() error { return c.stop(syscall.SIGINT) }

// Kill stops the server as a crash would (SIGQUIT, immediate shutdown:
// no checkpoint, recovery at the next Start).
func (c *Cluster) Kill() error { return c.stop(syscall.SIGQUIT) }

func (c *Cluster) stop(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return nil
	}
	if err := c.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("pgtest: stop postgres: %w", err)
	}
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("pgtest: postgres did not stop within 30 s\n%s", c.Log())
	}
	c.cmd, c.done = nil, nil
	return nil
}

// remove stops the server and removes the cluster's files.
func (c *Cluster) remove() error {
	return errors.Join(c.Stop(), os.RemoveAll(c.dir))
}

// Log is what the server has logged.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(c.logFile())
	return string(b)
}

// DSN is the URL of database db on the cluster.
func (c *Cluster) DSN(db string) string {
	q := url.Values{"host": {c.dir}, "port": {strconv.Itoa(port)}, "sslmode": {"disable"}}
	return (&url.URL{Scheme: "postgres", User: url.User(superuser), Path: "/" + db, RawQuery: q.Encode()}).String()
}

// NewDatabase creates an empty database, dropped when t ends, and returns
// its URL.
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", c.dbs.Add(1), strings.ToLower(sanitize(t.Name())))
	if len(name) > 63 {
		name = name[:63]
	}
	require(t, c.admin(`CREATE DATABASE "`+name+`"`))
	t.Cleanup(func() {
		if err := c.admin(`DROP DATABASE IF EXISTS "` + name + `" WITH (FORCE)`); err != nil && c.running() {
			t.Errorf("pgtest: %v", err)
		}
	})
	return c.DSN(name)
}

func (c *Cluster) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cmd != nil
}

// admin runs one statement on the postgres database.
func (c *Cluster) admin(stmt string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("pgtest: %s: %w", stmt, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("pgtest: %s: %w", stmt, err)
	}
	return nil
}

func require(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// sanitize keeps the letters and digits of a test's name.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// StoreEnv selects the database of the store under test in the store's
// and the server's tests: EDGEAIP_TEST_STORE=postgres runs them on
// PostgreSQL, a fresh database each on the shared cluster; unset, or
// sqlite, on SQLite.
const StoreEnv = "EDGEAIP_TEST_STORE"

// StoreOnPostgres reports whether StoreEnv selects PostgreSQL. Any value
// but those fails t.
func StoreOnPostgres(t testing.TB) bool {
	t.Helper()
	switch v := os.Getenv(StoreEnv); v {
	case "", "sqlite":
		return false
	case "postgres":
		return true
	default:
		t.Fatalf("%s=%q: want postgres or sqlite", StoreEnv, v)
		return false
	}
}

// Bin is the path of PostgreSQL's program name (pg_dump, pg_restore, …)
// of the cluster's version.
func (c *Cluster) Bin(name string) string { return filepath.Join(c.bin, name) }

// Dump is the data of the database at dsn, as pg_dump writes it: for a
// test to look for what must not be stored.
func (c *Cluster) Dump(t testing.TB, dsn string) string {
	t.Helper()
	out, err := exec.Command(c.Bin("pg_dump"), "--data-only", "--dbname", dsn).Output()
	if err != nil {
		t.Fatalf("pgtest: pg_dump: %v", err)
	}
	return string(out)
}

// Exec runs one statement on the database at dsn, failing t if it fails:
// for tests that change a database under the code they test (a role
// locked out, a trigger that refuses writes).
func Exec(t testing.TB, dsn, stmt string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err == nil {
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, stmt)
	}
	if err != nil {
		t.Fatalf("pgtest: %s: %v", stmt, err)
	}
}

// Role makes a login role of its own on the database at dsn, with every
// right on its tables (which must exist by then), dropped when t ends,
// and returns the role and the database's URL as that role: for a test
// that cuts one client off the database (LockOut) while others go on.
func Role(t testing.TB, dsn string) (role, asRole string) {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("pgtest: role name: %v", err)
	}
	role = "r_" + hex.EncodeToString(b[:])
	for _, stmt := range []string{`CREATE ROLE ` + role + ` LOGIN`, `GRANT USAGE, CREATE ON SCHEMA public TO ` + role,
		`GRANT ALL ON ALL TABLES IN SCHEMA public TO ` + role, `GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO ` + role} {
		Exec(t, dsn, stmt)
	}
	t.Cleanup(func() {
		LockOut(t, dsn, role)
		Exec(t, dsn, `DROP OWNED BY `+role)
		Exec(t, dsn, `DROP ROLE `+role)
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	u.User = url.User(role)
	return role, u.String()
}

// LockOut cuts role off the database at dsn: it may not log in, and its
// sessions are ended. LetIn lets it log in again.
func LockOut(t testing.TB, dsn, role string) {
	t.Helper()
	Exec(t, dsn, `ALTER ROLE `+role+` NOLOGIN`)
	Exec(t, dsn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '`+role+`'`)
}

// LetIn lets role log in to the database at dsn again.
func LetIn(t testing.TB, dsn, role string) {
	t.Helper()
	Exec(t, dsn, `ALTER ROLE `+role+` LOGIN`)
}

// Socket is the path of the Unix socket on which the server of dsn, a
// URL that DSN or NewDatabase gave, listens: the target of a proxy that
// stands between a client and it (internal/blackhole's StartTo).
func Socket(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	require(t, err)
	q := u.Query()
	return filepath.Join(q.Get("host"), ".s.PGSQL."+q.Get("port"))
}

// Through is dsn reached over TCP at addr (HOST:PORT), a proxy to its
// server's socket.
func Through(t testing.TB, dsn, addr string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	require(t, err)
	u.Host, u.RawQuery = addr, url.Values{"sslmode": {"disable"}}.Encode()
	return u.String()
}
