package wsgateway

import (
	"context"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// lastSeenFlush is how often the last_seen of online devices is written
// to the store. The API shows an online device's last_seen from memory,
// exact; the store's matters only once the device is offline, and its
// link's end writes it then. So the flush only bounds what a server
// killed at once would leave stale.
const lastSeenFlush = time.Minute

// A device's last_seen is when its link was last heard from: any frame,
// WebSocket ping or pong (protocol.Conn.LastHeard), kept in memory by the
// link. It used to be a durable write per heartbeat, at most every 10 s
// a device, the largest part of what idle links cost the server.

// FlushLastSeen writes, every lastSeenFlush until stop, the last_seen of
// the online devices heard from since it was last written.
func (g *Gateway) FlushLastSeen(stop <-chan struct{}) {
	t := time.NewTicker(lastSeenFlush)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			g.RecordLastSeen(context.Background(), g.reg.Devices())
		}
	}
}

// RecordLastSeen writes, in one write, the last_seen of each of devices
// heard from since it was last written. It need not be durable at once:
// a write fsynced later, or the next checkpoint, makes it so.
func (g *Gateway) RecordLastSeen(ctx context.Context, devices []*dispatch.Link) {
	type seen struct {
		c     *dispatch.Link
		heard time.Time
	}
	var todo []seen
	for _, c := range devices {
		if heard := c.Conn.LastHeard(); heard.UnixNano() > c.SeenAt.Load() {
			todo = append(todo, seen{c, heard})
		}
	}
	if len(todo) == 0 {
		return
	}
	err := g.store.WriteUnsynced(ctx, func(tx *store.Tx) error {
		for _, d := range todo {
			if err := tx.Devices().SetLastSeen(d.c.ID, d.heard); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		g.log.Warn("last_seen not recorded", "devices", len(todo), "err", err)
		return
	}
	for _, d := range todo {
		d.c.SeenAt.Store(d.heard.UnixNano())
	}
}
