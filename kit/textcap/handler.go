package textcap

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler returns a slog.Handler that hands each record to next with
// every string value, error text and Stringer at most max bytes (Clip),
// in groups too: a bound for all a server logs, fields it never thought
// to clip included. Records that need no change pass as they are.
func Handler(next slog.Handler, max int) slog.Handler {
	if h, ok := next.(clipHandler); ok && h.max <= max {
		return h
	}
	return clipHandler{next: next, max: max}
}

type clipHandler struct {
	next slog.Handler
	max  int
}

func (h clipHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h clipHandler) Handle(ctx context.Context, r slog.Record) error {
	fits := plain(r.Message, h.max)
	if fits {
		r.Attrs(func(a slog.Attr) bool {
			fits = h.fits(a.Value)
			return fits
		})
	}
	if fits {
		return h.next.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, Clip(r.Message, h.max), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.clip(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h clipHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = h.clip(a)
	}
	return clipHandler{next: h.next.WithAttrs(out), max: h.max}
}

func (h clipHandler) WithGroup(name string) slog.Handler {
	return clipHandler{next: h.next.WithGroup(name), max: h.max}
}

// fits reports whether v needs no clipping. Values of kind Any that are
// errors or Stringers are text of unknown length: they are clipped.
func (h clipHandler) fits(v slog.Value) bool {
	switch v.Kind() {
	case slog.KindString:
		return plain(v.String(), h.max)
	case slog.KindGroup:
		for _, a := range v.Group() {
			if !h.fits(a.Value) {
				return false
			}
		}
	case slog.KindAny, slog.KindLogValuer:
		switch v.Any().(type) {
		case error, fmt.Stringer, slog.LogValuer:
			return false
		}
	}
	return true
}

func (h clipHandler) clip(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(Clip(v.String(), h.max))
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, ga := range g {
			out[i] = h.clip(ga)
		}
		a.Value = slog.GroupValue(out...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			a.Value = slog.StringValue(Clip(x.Error(), h.max))
		case fmt.Stringer:
			a.Value = slog.StringValue(Clip(x.String(), h.max))
		default:
			a.Value = v
		}
	default:
		a.Value = v
	}
	return a
}
