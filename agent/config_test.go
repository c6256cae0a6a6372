package agent

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestAnAgentNeedsADataDirForItsOutbox(t *testing.T) {
	cfg := agentConfig(t, "ws://127.0.0.1:1/ws")
	cfg.DataDir = ""
	_, err := New(context.Background(), cfg)
	assert.EqualError(t, err, "agent: data dir is required: the agent keeps its outbox there")
}

func TestAConfigBuiltInGoIsCheckedAsTheFileIs(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*Config)
		want   string
	}{
		"server url": {func(c *Config) { c.ServerURL = "not a url" },
			`agent: server URL "not a url": want ws://HOST/PATH or wss://HOST/PATH`},
		"ping": {func(c *Config) { c.Conn.PingInterval = time.Minute },
			`agent: ping interval 1m0s: at most 50s, so that a dead link is noticed within 60s`},
		"outbox max_age": {func(c *Config) { c.Outbox.MaxAge = time.Hour },
			`agent: outbox max age 1h0m0s: at least 24h, as long as the server may send a command again`},
		"outbox max_bytes": {func(c *Config) { c.Outbox.MaxBytes = 1 << 20 },
			`agent: outbox max bytes 1048576 bytes: at least the frame cap, 4194304 bytes`},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := agentConfig(t, "ws://127.0.0.1:1/ws")
			tc.change(&cfg)
			_, err := New(context.Background(), cfg)
			assert.EqualError(t, err, tc.want)
		})
	}
}
