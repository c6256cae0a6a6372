package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func query(t *testing.T, dsn, q string) (string, error) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var s string
	err = conn.QueryRow(context.Background(), q).Scan(&s)
	return s, err
}

// A test gets a database of its own on the shared cluster, in UTF-8 with
// the C collation.
func TestEachTestGetsAFreshDatabase(t *testing.T) {
	c := Shared(t)
	a, b := c.NewDatabase(t), c.NewDatabase(t)
	if a == b {
		t.Fatalf("two databases, one URL: %s", a)
	}
	got, err := query(t, a, `SELECT current_database() || ' ' || pg_encoding_to_char(encoding) || ' ' || datcollate FROM pg_database WHERE datname = current_database()`)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(got)
	if want := " UTF8 C"; len(got) < len(want) || got[len(got)-len(want):] != want {
		t.Errorf("database %q, want UTF8 and C", got)
	}
}

// A cluster stopped refuses connections, and started again has what it
// had.
func TestAClusterStopsAndStartsAgainWithItsData(t *testing.T) {
	c := Start(t)
	dsn := c.NewDatabase(t)
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), `CREATE TABLE x (v text); INSERT INTO x VALUES ('kept')`); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := query(t, dsn, `SELECT v FROM x`); err == nil {
		t.Fatal("a stopped cluster took a connection")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	got, err := query(t, dsn, `SELECT v FROM x`)
	if err != nil || got != "kept" {
		t.Fatalf("after a restart: %q, %v", got, err)
	}
}
