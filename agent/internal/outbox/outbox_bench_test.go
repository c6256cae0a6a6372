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
// accept record and the result record, each fsynced, and the ack.
func BenchmarkOutboxCommand(b *testing.B) {
	o, _, err := outbox.Open(filepath.Join(b.TempDir(), "j"), outbox.OSFS{}, protocol.CBOR, config.OutboxLimits{MaxBytes: 16 << 20, MaxAge: time.Hour}, quietLog)
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	for i := range b.N {
		id := fmt.Sprintf("r%d", i)
		o.Admit(id)
		if err := o.Accept(outboxtest.Command(id)); err != nil {
			b.Fatal(err)
		}
		r, err := reply.Encode(outboxtest.Results(id, "result"), protocol.CBOR, quietLog)
		if err != nil {
			b.Fatal(err)
		}
		if err := o.Complete(r); err != nil {
			b.Fatal(err)
		}
		o.Delivered("req-" + id)
	}
}
