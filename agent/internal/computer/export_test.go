package computer

import "context"

// Acquire is acquire, for tests that hold a Computer as a command does.
func (m *Manager) Acquire(ctx context.Context, t Target) (*Computer, func(), error) {
	return m.acquire(ctx, t)
}
