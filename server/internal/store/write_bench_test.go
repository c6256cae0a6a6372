package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/internal/benchlat"
	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/edgeaip/edgeaip/protocol"
)

// BenchmarkWrite is the store's write path as a command takes it: the
// command recorded before it is sent, committed but not waited for to be
// durable (WriteUnsynced, as the dispatcher records a command without an
// Idempotency-Key), then its results (and audit entries) in a durable
// write, on SQLite and on PostgreSQL (a throwaway cluster on a Unix
// socket, fsync and synchronous_commit on), with 1 and with 64 writers at
// once. ns/op is wall time per command across all writers; p50 and p99
// are one command's two writes.
func BenchmarkWrite(b *testing.B) {
	for _, backend := range []Backend{SQLite, Postgres} {
		for _, writers := range []int{1, 64} {
			b.Run(fmt.Sprintf("backend=%s/writers=%d", backend, writers), func(b *testing.B) {
				location := filepath.Join(b.TempDir(), "bench.db")
				if backend == Postgres {
					location = pgtest.Shared(b).NewDatabase(b)
				}
				s, err := Open(context.Background(), location, Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				benchCommands(b, s, writers)
			})
		}
	}
}

func benchCommands(b *testing.B, s *Store, writers int) {
	ctx := context.Background()
	results := []protocol.Result{{Status: protocol.ResultSuccess, Result: "ok", CallID: "c1"}, {Status: protocol.ResultSuccess, CallID: "c2"}}
	benchlat.Run(b, writers, func(i int) error {
		id := fmt.Sprintf("r%d", i)
		err := s.WriteUnsynced(ctx, func(tx *Tx) error {
			return tx.InsertCommand(Command{ResponseID: id, DeviceID: "kiosk-1", SessionID: "s1", Actor: "operator",
				Actions: twoActions(), Tools: []ToolRef{{Namespace: "stock", SHA256: "abc"}, {}}})
		})
		if err != nil {
			return err
		}
		return s.Write(ctx, func(tx *Tx) error { _, err := tx.RecordResults("kiosk-1", id, results); return err })
	})
}
