package store

import (
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/internal/pgtest"
)

// testLocation is where a test's store lives: a SQLite file in its temp
// dir or, with EDGEAIP_TEST_STORE=postgres, a fresh PostgreSQL database.
func testLocation(t *testing.T) string {
	t.Helper()
	if pgtest.StoreOnPostgres(t) {
		return pgtest.Shared(t).NewDatabase(t)
	}
	return filepath.Join(t.TempDir(), "test.db")
}

// sqliteOnly skips t on PostgreSQL, saying why.
func sqliteOnly(t *testing.T, why string) {
	t.Helper()
	if pgtest.StoreOnPostgres(t) {
		t.Skipf("SQLite only: %s", why)
	}
}
