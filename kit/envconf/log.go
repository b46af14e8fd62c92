package envconf

import (
	"io"
	"log/slog"
)

// Log is what LOG_LEVEL and LOG_FORMAT ask for. Both binaries read it the
// same way, so an operator configures their logs with the same two names.
type Log struct {
	Level  slog.Level
	Format string // "json" or "text"
}

// Log reads LOG_LEVEL (debug, info, warn, error; default info) and
// LOG_FORMAT (json, text; default json).
func (r *Reader) Log() Log {
	level := r.OneOf("LOG_LEVEL", "info", []string{"debug", "info", "warn", "error"}, "least severe log level written")
	format := r.OneOf("LOG_FORMAT", "json", []string{"json", "text"}, "log line format")
	var l slog.Level
	_ = l.UnmarshalText([]byte(level)) // one of the four names above
	return Log{Level: l, Format: format}
}

// Logger returns a logger writing to w at l's level and in l's format.
func (l Log) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: l.Level}
	if l.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
