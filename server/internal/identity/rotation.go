package identity

import (
	"context"
	"errors"
	"sync"

	"github.com/edgeaip/edgeaip/server/internal/store"
)

// A device token's rotation ends when the device confirms it, by a
// message or by connecting with its new token, or fails to take the new
// token. wsgateway's rotation.go drives the device's link; the ends are
// recorded here, where a connection's token is checked too.

// WaitRotation returns a channel closed when device id next confirms a
// rotation, or fails to take its new token, here or, as SettledElsewhere
// says, on another node.
func (a *Authority) WaitRotation(id string) <-chan struct{} { return a.rotations.wait(id) }

// SettledElsewhere wakes those waiting for device id, whose rotation
// another node of a cluster saw settled.
func (a *Authority) SettledElsewhere(id string) { a.rotations.settled(id) }

// ConfirmRotation makes the sent token hashing to hash device id's token,
// how says what confirmed it. One already confirmed is left as it is.
func (a *Authority) ConfirmRotation(ctx context.Context, id, hash, how string) {
	err := a.store.Write(ctx, func(tx *store.Tx) error { return tx.Devices().ConfirmRotation(id, hash) })
	switch {
	case errors.Is(err, store.ErrNotFound):
		return
	case err != nil:
		a.log.Error("token rotation not recorded; the old token still works", "device", id, "err", err)
		return
	}
	a.log.Info("device token rotated: the old token is retired", "device", id, "confirmed", how)
	a.rotations.settled(id)
	a.onRotationSettled(id)
}

// FailRotation records why device id could not take its new token; the
// rotation stays pending, for its next registration.
func (a *Authority) FailRotation(ctx context.Context, id, why string) {
	a.log.Warn("device token not rotated; it keeps its old token", "device", id, "why", why)
	if err := a.store.Write(ctx, func(tx *store.Tx) error { return tx.Devices().FailRotation(id, why) }); err != nil && !errors.Is(err, store.ErrNotFound) {
		a.log.Error("failed token rotation not recorded", "device", id, "err", err)
	}
	a.rotations.settled(id)
	a.onRotationSettled(id)
}

// rotationWaiters are the rotation requests waiting for their device to
// answer, by device id.
type rotationWaiters struct {
	mu sync.Mutex
	by map[string]chan struct{}
}

func newRotationWaiters() *rotationWaiters { return &rotationWaiters{by: map[string]chan struct{}{}} }

// wait returns a channel closed when device id next confirms a rotation,
// or fails to take its new token.
func (w *rotationWaiters) wait(id string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.by[id]
	if !ok {
		ch = make(chan struct{})
		w.by[id] = ch
	}
	return ch
}

// settled wakes those waiting for device id.
func (w *rotationWaiters) settled(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.by[id]; ok {
		close(ch)
		delete(w.by, id)
	}
}
