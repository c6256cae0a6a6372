package outbox_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/agent/internal/outbox"
	"github.com/edgeaip/edgeaip/agent/internal/outbox/outboxtest"
	"github.com/edgeaip/edgeaip/agent/internal/reply"
	"github.com/edgeaip/edgeaip/protocol"
)

// BenchmarkOutboxCommand is the outbox's cost per command: admission, the
// accept record and the result record, each fsynced, and the ack. The
// results come encoded, as the executor hands them over: the outbox
// records their bytes.
func BenchmarkOutboxCommand(b *testing.B) {
	o, _, err := outbox.Open(filepath.Join(b.TempDir(), "j"), outbox.OSFS{}, protocol.CBOR, config.OutboxLimits{MaxBytes: 16 << 20, MaxAge: time.Hour}, quietLog)
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	replies := make([]reply.Reply, b.N)
	for i := range replies {
		if replies[i], err = reply.Encode(outboxtest.Results(fmt.Sprintf("r%d", i), "result"), protocol.CBOR, quietLog); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for _, r := range replies {
		id := r.ResponseID()
		o.Admit(id)
		if err := o.Accept(outboxtest.Command(id)); err != nil {
			b.Fatal(err)
		}
		if err := o.Complete(r); err != nil {
			b.Fatal(err)
		}
		o.Delivered("req-" + id)
	}
}
