// Package lazylog is a log/slog logger with a fixed set of attributes
// that builds nothing until it logs a line at an enabled level: the
// server's command path names each command, session and set of results
// in its lines, and logs one line at info per command.
package lazylog

import (
	"context"
	"log/slog"
	"sync"
)

// Logger logs with a fixed set of attributes, as a logger from slog's
// With does, but builds nothing until it logs a line at an enabled level.
// With copies the handler and formats the attributes at once: a command
// paid for three such loggers on its path (its own, its session's, its
// results'), though it logs one line at info in all. Each line is logged
// with the attributes first, as With's logger writes them.
type Logger struct {
	base  *slog.Logger
	attrs func() []any

	once sync.Once
	args []any // attrs(), once a line needed them
}

// New is a Logger on base whose attributes attrs gives.
func New(base *slog.Logger, attrs func() []any) *Logger {
	l := &Logger{}
	l.Init(base, attrs)
	return l
}

// Init makes l, a zero Logger held in a struct, a Logger on base with
// attrs: see New.
func (l *Logger) Init(base *slog.Logger, attrs func() []any) { l.base, l.attrs = base, attrs }

func (l *Logger) Debug(msg string, args ...any) { l.Log(slog.LevelDebug, msg, args...) }
func (l *Logger) Info(msg string, args ...any)  { l.Log(slog.LevelInfo, msg, args...) }
func (l *Logger) Warn(msg string, args ...any)  { l.Log(slog.LevelWarn, msg, args...) }
func (l *Logger) Error(msg string, args ...any) { l.Log(slog.LevelError, msg, args...) }

// Log logs msg at level with l's attributes, then args.
func (l *Logger) Log(level slog.Level, msg string, args ...any) {
	ctx := context.Background()
	if !l.base.Enabled(ctx, level) {
		return
	}
	fixed := l.fixed()
	all := make([]any, 0, len(fixed)+len(args))
	l.base.Log(ctx, level, msg, append(append(all, fixed...), args...)...)
}

// Slog is a slog.Logger with l's attributes, for code that takes one.
func (l *Logger) Slog() *slog.Logger { return l.base.With(l.fixed()...) }

func (l *Logger) fixed() []any {
	l.once.Do(func() { l.args = l.attrs() })
	return l.args
}
