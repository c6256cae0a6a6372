// Package logging builds the binaries' log/slog loggers from their
// --log-format and --log-level flags: text by default, JSON for log
// collectors.
package logging

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// Formats of [Options.Format].
const (
	FormatText = "text"
	FormatJSON = "json"
)

// Options are the logging flags.
type Options struct {
	// Format is FormatText or FormatJSON.
	Format string
	// Level is the least severe level written.
	Level slog.Level
}

// RegisterFlags adds --log-format and --log-level to fs; a bad value is a
// usage error when fs parses it.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	o.Format = FormatText
	fs.Func("log-format", "log format: text or json (default text)", func(v string) error {
		if v != FormatText && v != FormatJSON {
			return fmt.Errorf("want text or json, got %q", v)
		}
		o.Format = v
		return nil
	})
	fs.TextVar(&o.Level, "log-level", slog.LevelInfo, "least severe level logged: debug, info, warn or error")
}

// New returns a logger writing to w in o's format at o's level.
func (o Options) New(w io.Writer) *slog.Logger {
	ho := &slog.HandlerOptions{Level: o.Level}
	if o.Format == FormatJSON {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}
