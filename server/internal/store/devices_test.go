package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// sites are the devices the label tests enroll, with their labels.
var sites = map[string]map[string]string{
	"lobby-1": {"site": "lobby", "tier": "kiosk"},
	"lobby-2": {"site": "lobby", "tier": "board"},
	"depot-1": {"site": "depot", "tier": "kiosk"},
	"bare-1":  nil,
}

// requireMatching requires DeviceReads.Matching to list want for each selector
// in cases, read with ParseSelector.
func requireMatching(t *testing.T, s *Store, cases map[string][]string) {
	t.Helper()
	for text, want := range cases {
		sel, err := access.ParseSelector(text)
		require.NoError(t, err)
		got, err := s.Devices().Matching(context.Background(), sel, 0)
		require.NoError(t, err, text)
		assert.Equal(t, want, got, "%q", text)
	}
}

// The devices a selector picks are read from the label index, as
// Selector.Matches would pick them from every device's labels: an
// equality needs the label, an inequality is met without it.
func TestDevicesMatchingPicksWhatTheSelectorMatches(t *testing.T) {
	s, _ := openTest(t)
	write(t, s, func(tx *Tx) error {
		for id, labels := range sites {
			if err := tx.Devices().Create(id, "hash-"+id, labels); err != nil {
				return err
			}
		}
		return nil
	})
	cases := map[string][]string{
		"":                          {"bare-1", "depot-1", "lobby-1", "lobby-2"},
		"site=lobby":                {"lobby-1", "lobby-2"},
		"site=lobby,tier=kiosk":     {"lobby-1"},
		"tier=kiosk,site!=lobby":    {"depot-1"},
		"site!=lobby":               {"bare-1", "depot-1"},
		"site!=lobby,tier!=kiosk":   {"bare-1"},
		"site=yard":                 {},
		"site=lobby,site=depot":     {},
		"site=lobby,site!=lobby":    {},
		"tier=kiosk,tier=kiosk":     {"depot-1", "lobby-1"},
		"tier=board,site=lobby":     {"lobby-2"},
		"site=lobby,tier!=kiosk":    {"lobby-2"},
		"site!=depot,tier!=board":   {"bare-1", "lobby-1"},
		"site=depot,tier=kiosk":     {"depot-1"},
		"tier=kiosk,site=depot,a=b": {},
	}
	for text, want := range cases {
		sel, err := access.ParseSelector(text)
		require.NoError(t, err)
		var picked []string
		for id, labels := range sites {
			if sel.Matches(labels) {
				picked = append(picked, id)
			}
		}
		assert.ElementsMatch(t, picked, want, "the case %q agrees with Matches", text)
	}
	requireMatching(t, s, cases)

	some, err := s.Devices().Matching(context.Background(), nil, 2)
	require.NoError(t, err)
	assert.Len(t, some, 2, "at most the limit")

	write(t, s, func(tx *Tx) error { return tx.Devices().Delete("lobby-1") })
	requireMatching(t, s, map[string][]string{"site=lobby": {"lobby-2"}, "tier!=board": {"bare-1", "depot-1"}})
}

// openRaw opens the database at location without the store, and returns
// it with its dialect.
func openRaw(t *testing.T, location string) (*sql.DB, dialect) {
	t.Helper()
	if IsPostgresURL(location) {
		cfg, err := pgx.ParseConfig(location)
		require.NoError(t, err)
		return stdlib.OpenDB(*cfg), postgresDialect{}
	}
	db, err := openDB(location)
	require.NoError(t, err)
	return db, sqliteDialect{}
}

// The labels of devices enrolled before the label index are indexed by
// its migration.
func TestTheLabelIndexsMigrationIndexesDevicesEnrolledBefore(t *testing.T) {
	location := testLocation(t)
	db, d := openRaw(t, location)
	ctx := context.Background()
	// Every migration before migration 14, the label index's.
	for i := range 13 {
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = d.schemaVersion(ctx, tx)
		require.NoError(t, err)
		require.NoError(t, applyMigration(ctx, tx, d, i))
		require.NoError(t, tx.Commit())
	}
	for id, labels := range map[string]string{"lobby-1": `{"site":"lobby","tier":"kiosk"}`, "depot-1": `{"site":"depot"}`, "bare-1": `{}`} {
		_, err := db.ExecContext(ctx, d.bind(`INSERT INTO devices (id, token_hash, labels, created_at) VALUES (?, ?, ?, ?)`), id, "hash-"+id, labels, sqlrow.Now())
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	s, _ := openTestAt(t, location)
	requireMatching(t, s, map[string][]string{
		"site=lobby,tier=kiosk": {"lobby-1"},
		"site=depot":            {"depot-1"},
		"site!=lobby":           {"bare-1", "depot-1"},
	})
}

// BenchmarkDevicesInScope lists the devices of a scope that picks one in
// a hundred of a fleet whose devices have reported their system info
// (2 KiB each): from every device's row, filtered in Go, as scoped
// listings did, and from the label index.
func BenchmarkDevicesInScope(b *testing.B) {
	for _, fleet := range []int{1000, 10000} {
		s, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), Options{})
		require.NoError(b, err)
		info := json.RawMessage(`{"os":"` + strings.Repeat("x", 2048) + `"}`)
		require.NoError(b, s.Write(context.Background(), func(tx *Tx) error {
			for i := range fleet {
				id := fmt.Sprintf("kiosk-%05d", i)
				if err := tx.Devices().Create(id, "hash-"+id, map[string]string{"site": fmt.Sprintf("s%d", i%100), "tier": "kiosk"}); err != nil {
					return err
				}
				if err := tx.Devices().See(id, info, time.Now()); err != nil {
					return err
				}
			}
			return nil
		}))
		sel, err := access.ParseSelector("site=s7,tier=kiosk")
		require.NoError(b, err)
		reads := []struct {
			name string
			read func() ([]string, error)
		}{
			{"every-row", func() ([]string, error) {
				devs, err := s.Devices().All(context.Background())
				var ids []string
				for _, d := range devs {
					if sel.Matches(d.Labels) {
						ids = append(ids, d.ID)
					}
				}
				return ids, err
			}},
			{"index", func() ([]string, error) { return s.Devices().Matching(context.Background(), sel, 0) }},
		}
		for _, r := range reads {
			b.Run(fmt.Sprintf("fleet=%d/read=%s", fleet, r.name), func(b *testing.B) {
				for b.Loop() {
					ids, err := r.read()
					require.NoError(b, err)
					require.Len(b, ids, fleet/100)
				}
			})
		}
		s.Close()
	}
}
