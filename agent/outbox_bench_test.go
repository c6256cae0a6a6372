package agent

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkOutboxCommand is the outbox's cost per command: admission, the
// accept record and the result record, each fsynced, and the ack.
func BenchmarkOutboxCommand(b *testing.B) {
	o, _, err := openOutbox(filepath.Join(b.TempDir(), "j"), osFS{}, OutboxLimits{MaxBytes: 16 << 20, MaxAge: time.Hour}, quietLog)
	if err != nil {
		b.Fatal(err)
	}
	defer o.close()
	for i := range b.N {
		id := fmt.Sprintf("r%d", i)
		o.admit(id)
		if err := o.accept(testCommand(id)); err != nil {
			b.Fatal(err)
		}
		if err := o.complete(testReply(id, "result")); err != nil {
			b.Fatal(err)
		}
		o.delivered("req-" + id)
	}
}
