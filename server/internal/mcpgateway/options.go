package mcpgateway

import (
	"time"

	"github.com/edgeaip/edgeaip/server/plan"
)

// Options tunes the MCP gateway. The zero value gives the defaults.
type Options struct {
	// DirectTools: an identity whose scope covers at most this many
	// enrolled devices also sees each of their tools as a tool of its own,
	// DEVICE__TOOL. Default 8; negative: never.
	DirectTools int
	// OfflineToolsGrace: a device's DEVICE__TOOL tools stay listed, said
	// to be offline since it was last heard from, for this long after it
	// was. Default 24 hours; negative: they go as the device does.
	OfflineToolsGrace time.Duration
	// ToolsPageSize is how many tools a page of tools/list holds; the
	// next is had with its cursor. Default 50.
	ToolsPageSize int
	// CallsPerMinute and CallsAtOnce bound one identity's tool calls.
	// Defaults 120 and 8.
	CallsPerMinute int
	CallsAtOnce    int
	// MaxResultBytes bounds a result's JSON in an answer; a larger one is
	// cut, saying so and where the whole is. Default 64 KiB.
	MaxResultBytes int
	// SessionIdleTTL: a session that makes no request, and whose stream
	// carries nothing, for this long is dropped with everything the
	// gateway keeps of it, since a client may go away without its
	// DELETE. Default 30 minutes; negative: never.
	SessionIdleTTL time.Duration
	// MaxSessionsPerIdentity and MaxSessions bound the sessions one
	// identity, and every identity together, hold on this node: past
	// either, a new session takes the place of the oldest idle one (the
	// identity's own for its bound), or is refused with 429 if all are
	// busy (internal/mcpsessions). Defaults 256 and 4096.
	MaxSessionsPerIdentity int
	MaxSessions            int
	// TaskMaxTTL bounds the ttl of a call run as an MCP task, which is
	// how long it may wait for its device and run: a client asking for
	// more gets this. Default 24 hours, the longest a command may take.
	TaskMaxTTL time.Duration
}

func (c *Options) setDefaults() {
	if c.DirectTools == 0 {
		c.DirectTools = 8
	}
	if c.OfflineToolsGrace == 0 {
		c.OfflineToolsGrace = 24 * time.Hour
	}
	if c.ToolsPageSize <= 0 {
		c.ToolsPageSize = 50
	}
	if c.CallsPerMinute <= 0 {
		c.CallsPerMinute = 120
	}
	if c.CallsAtOnce <= 0 {
		c.CallsAtOnce = 8
	}
	if c.MaxResultBytes <= 0 {
		c.MaxResultBytes = 64 << 10
	}
	if c.MaxSessionsPerIdentity <= 0 {
		c.MaxSessionsPerIdentity = 256
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = 4096
	}
	if c.TaskMaxTTL <= 0 || c.TaskMaxTTL > plan.MaxTimeout {
		c.TaskMaxTTL = plan.MaxTimeout
	}
	if c.SessionIdleTTL == 0 {
		c.SessionIdleTTL = 30 * time.Minute
	}
}
