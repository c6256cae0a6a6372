package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent/internal/logtest"
	"github.com/edgeaip/edgeaip/agent/internal/outbox"
	"github.com/edgeaip/edgeaip/internal/benchlat"
	"github.com/edgeaip/edgeaip/protocol"
)

// BenchmarkCommand is the agent's half of a command, one at a time: from
// a COMMAND the scripted peer sends on loopback to the COMMAND_RESULTS it
// reads, through the real link, executor and outbox (fsynced, in the
// test's temp dir) and the echo wasm tool; the peer acknowledges the
// results as the server does. It reports the p50 and p99 of that.
//
// next=at-once sends each command as soon as the results of the one
// before are in, so that its accept record may wait for their fsync;
// next=after-ack once the agent has counted their ack, which it does
// once their record is on disk, as when a server's own part of a round
// trip (e2e's BenchmarkRoundTrip) outlasts that fsync.
func BenchmarkCommand(b *testing.B) {
	p := newTestPeer(b)
	cfg := agentConfig(b, p.url())
	cfg.MCP, cfg.Logger = nil, logtest.Quiet
	ctx, cancel := context.WithCancel(context.Background())
	a, err := newAgent(ctx, cfg, outbox.OSFS{})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(ctx)
	}()
	b.Cleanup(func() {
		cancel()
		<-done
		a.Close(context.Background())
	})
	l := p.next(b)
	echo := action("echo", map[string]any{"msg": "hi"})
	command := func() {
		m := newCommand("", echo)
		l.send(b, m)
		if res := l.results(b, m.ResponseID); res[0].Status != protocol.ResultSuccess {
			b.Fatalf("echo: %+v", res[0])
		}
	}
	command() // the first call compiles the tool
	for _, afterAck := range []bool{false, true} {
		b.Run(fmt.Sprintf("next=%s", map[bool]string{false: "at-once", true: "after-ack"}[afterAck]), func(b *testing.B) {
			lat := make([]time.Duration, b.N)
			b.ResetTimer()
			for i := range lat {
				for afterAck && a.outbox.Undelivered() > 0 {
					time.Sleep(10 * time.Microsecond)
				}
				start := time.Now()
				command()
				lat[i] = time.Since(start)
			}
			b.StopTimer()
			benchlat.Report(b, lat)
		})
	}
}
