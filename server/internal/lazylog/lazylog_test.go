package lazylog

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A Logger writes the lines With's logger writes, and builds its
// attributes only for a line that is logged.
func TestLazyLogWritesWhatWithWrites(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var want, got bytes.Buffer
			handler := func(w *bytes.Buffer) *slog.Logger {
				o := &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: dropTime}
				if format == "json" {
					return slog.New(slog.NewJSONHandler(w, o))
				}
				return slog.New(slog.NewTextHandler(w, o))
			}
			built := 0
			lazy := New(handler(&got), func() []any {
				built++
				return []any{"device", "d1", "call_id", "c1,c2"}
			})
			eager := handler(&want).With("device", "d1", "call_id", "c1,c2")

			lazy.Debug("not logged", "n", 1)
			assert.Zero(t, built, "nothing is built for a line below the level")
			lazy.Info("command done", "status", "success")
			lazy.Warn("command failed", "err", "boom")
			lazy.Error("not recorded", "kept", true)
			lazy.Log(slog.LevelInfo, "as a level")
			lazy.Slog().Info("through a logger", "n", 2)
			eager.Info("command done", "status", "success")
			eager.Warn("command failed", "err", "boom")
			eager.Error("not recorded", "kept", true)
			eager.Log(t.Context(), slog.LevelInfo, "as a level")
			eager.Info("through a logger", "n", 2)
			assert.Equal(t, want.String(), got.String())
			assert.Equal(t, 1, built, "the attributes are built once")
		})
	}
}

func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
