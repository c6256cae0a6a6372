package server

import (
	"context"
	"log/slog"
	"sync"
)

// lazyLog logs with a fixed set of attributes, as a logger from slog's
// With does, but builds nothing until it logs a line at an enabled level.
// With copies the handler and formats the attributes at once: a command
// paid for three such loggers on its path (its own, its session's, its
// results'), though it logs one line at info in all. Each line is logged
// with the attributes first, as With's logger writes them.
type lazyLog struct {
	base  *slog.Logger
	attrs func() []any

	once sync.Once
	args []any // attrs(), once a line needed them
}

// newLazyLog is a lazyLog on base whose attributes attrs gives.
func newLazyLog(base *slog.Logger, attrs func() []any) *lazyLog {
	l := &lazyLog{}
	l.init(base, attrs)
	return l
}

// init makes l, a zero lazyLog held in a struct, a lazyLog on base with
// attrs: see newLazyLog.
func (l *lazyLog) init(base *slog.Logger, attrs func() []any) { l.base, l.attrs = base, attrs }

func (l *lazyLog) Debug(msg string, args ...any) { l.Log(slog.LevelDebug, msg, args...) }
func (l *lazyLog) Info(msg string, args ...any)  { l.Log(slog.LevelInfo, msg, args...) }
func (l *lazyLog) Warn(msg string, args ...any)  { l.Log(slog.LevelWarn, msg, args...) }
func (l *lazyLog) Error(msg string, args ...any) { l.Log(slog.LevelError, msg, args...) }

// Log logs msg at level with l's attributes, then args.
func (l *lazyLog) Log(level slog.Level, msg string, args ...any) {
	ctx := context.Background()
	if !l.base.Enabled(ctx, level) {
		return
	}
	fixed := l.fixed()
	all := make([]any, 0, len(fixed)+len(args))
	l.base.Log(ctx, level, msg, append(append(all, fixed...), args...)...)
}

// logger is a slog.Logger with l's attributes, for code that takes one.
func (l *lazyLog) logger() *slog.Logger { return l.base.With(l.fixed()...) }

func (l *lazyLog) fixed() []any {
	l.once.Do(func() { l.args = l.attrs() })
	return l.args
}
