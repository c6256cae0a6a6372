package store

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

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
	onEachBackend(b, benchCommands)
}

// BenchmarkWriteSingleCommand is BenchmarkWrite for a single command
// as the dispatcher writes it, with the session it alone makes up: the
// session and the command recorded unsynced, then the results, their
// audit entries and the session's end in one durable write.
func BenchmarkWriteSingleCommand(b *testing.B) {
	onEachBackend(b, func(b *testing.B, s *Store, writers int) {
		benchWrites(b, writers, func(i int) error { return writeSingleCommand(s, i) })
	})
}

// onEachBackend runs bench on a fresh store of each backend, with 1 and
// with 64 writers at once.
func onEachBackend(b *testing.B, bench func(b *testing.B, s *Store, writers int)) {
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
				bench(b, s, writers)
			})
		}
	}
}

// writeSingleCommand writes command i and the session it makes up, as
// the dispatcher does.
func writeSingleCommand(s *Store, i int) error {
	ses, c := singleCommand(i)
	if err := recordSingleCommand(s, ses, c); err != nil {
		return err
	}
	return endSingleCommand(s, ses, c)
}

// singleCommand is command i, of two actions, and the session it alone
// makes up.
func singleCommand(i int) (Session, Command) {
	// Time-ordered ids, as the server's: each batch's rows go at the end
	// of their indexes. No task name, as a command from the API has none.
	id := fmt.Sprintf("0190a000-0000-7000-8000-%012d", i)
	ses := Session{ID: id + "-s", DeviceID: "kiosk-1", RequesterKind: "operator", Kind: "command",
		State: "running", CreatedAt: time.Now(), StartedAt: time.Now()}
	c := Command{ResponseID: id, DeviceID: "kiosk-1", SessionID: ses.ID, Actor: "operator", Actions: twoActions(),
		Tools: []ToolRef{{Namespace: "stock", SHA256: "abc"}, {}}}
	return ses, c
}

// recordSingleCommand records command c and its session ses before the
// command is sent, unsynced, as the dispatcher does.
func recordSingleCommand(s *Store, ses Session, c Command) error {
	return s.WriteUnsynced(context.Background(), func(tx *Tx) error {
		if err := tx.Sessions().Insert(ses); err != nil {
			return err
		}
		return tx.Commands().Insert(c)
	})
}

// endSingleCommand records the results of command c, their audit
// entries and the end of its session ses in one durable write, as the
// dispatcher does.
func endSingleCommand(s *Store, ses Session, c Command) error {
	results := []protocol.Result{{Status: protocol.ResultSuccess, Result: "ok", CallID: "c1"}, {Status: protocol.ResultSuccess, CallID: "c2"}}
	return s.Write(context.Background(), func(tx *Tx) error {
		if _, err := tx.Commands().RecordSentResults(c, "kiosk-1", results); err != nil {
			return err
		}
		end := ses
		end.State, end.Result = "completed", []byte(`{"status":"completed"}`)
		return tx.Sessions().EndRecorded(end)
	})
}

func benchCommands(b *testing.B, s *Store, writers int) {
	ctx := context.Background()
	results := []protocol.Result{{Status: protocol.ResultSuccess, Result: "ok", CallID: "c1"}, {Status: protocol.ResultSuccess, CallID: "c2"}}
	benchWrites(b, writers, func(i int) error {
		id := fmt.Sprintf("r%d", i)
		err := s.WriteUnsynced(ctx, func(tx *Tx) error {
			return tx.Commands().Insert(Command{ResponseID: id, DeviceID: "kiosk-1", SessionID: "s1", Actor: "operator",
				Actions: twoActions(), Tools: []ToolRef{{Namespace: "stock", SHA256: "abc"}, {}}})
		})
		if err != nil {
			return err
		}
		return s.Write(ctx, func(tx *Tx) error { _, err := tx.Commands().RecordResults("kiosk-1", id, results); return err })
	})
}

// benchWrites runs command(i) for each i below b.N, from writers
// goroutines at once (benchlat.Run: p50 and p99 of one command), and
// reports the process's CPU time per command, which a loaded machine
// disturbs less than the wall time.
func benchWrites(b *testing.B, writers int, command func(i int) error) {
	cpu := cpuTime(b)
	benchlat.Run(b, writers, command)
	b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// cpuTime is the CPU time the process has used, in user and kernel mode.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
