package sqldb

import (
	"context"
	"database/sql"
	"strings"

	"github.com/idnhq/idn/kit/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracedDB is the store's *sql.DB with a client span around every query
// and statement made outside a transaction, and one around each
// transaction, when StoreConfig.TracerProvider is set. A span is named
// for the statement's operation and table ("SELECT claims") and carries
// neither the statement's text nor its arguments. Off, each method is a
// direct call.
type tracedDB struct {
	*sql.DB
	tracer tracing.Tracer
	system string // db.system.name
}

func (db *tracedDB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if !db.tracer.On() || untraced(ctx) {
		return db.DB.QueryContext(ctx, query, args...)
	}
	ctx, span := db.start(ctx, query)
	rows, err := db.DB.QueryContext(ctx, query, args...)
	endDBSpan(span, err)
	return rows, err
}

func (db *tracedDB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if !db.tracer.On() || untraced(ctx) {
		return db.DB.QueryRowContext(ctx, query, args...)
	}
	ctx, span := db.start(ctx, query)
	row := db.DB.QueryRowContext(ctx, query, args...)
	endDBSpan(span, row.Err())
	return row
}

func (db *tracedDB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if !db.tracer.On() || untraced(ctx) {
		return db.DB.ExecContext(ctx, query, args...)
	}
	ctx, span := db.start(ctx, query)
	res, err := db.DB.ExecContext(ctx, query, args...)
	endDBSpan(span, err)
	return res, err
}

func (db *tracedDB) start(ctx context.Context, query string) (context.Context, trace.Span) {
	op, table := statementSummary(query)
	name := op
	if table != "" {
		name += " " + table
	}
	ctx, span := db.tracer.Start(ctx, name, trace.SpanKindClient)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("db.system.name", db.system), attribute.String("db.operation.name", op))
		if table != "" {
			span.SetAttributes(attribute.String("db.collection.name", table))
		}
	}
	return ctx, span
}

// endDBSpan ends a database span; an error marks it failed without its
// text, which may quote a value.
func endDBSpan(span trace.Span, err error) {
	if err != nil && err != sql.ErrNoRows {
		span.SetStatus(codes.Error, "")
	}
	span.End()
}

// statementSummary returns a statement's operation (its first keyword) and
// the table it names first after FROM, INTO or UPDATE, or "".
func statementSummary(query string) (op, table string) {
	words := strings.Fields(query)
	if len(words) == 0 {
		return "SQL", ""
	}
	op = strings.ToUpper(words[0])
	for i, w := range words[:len(words)-1] {
		switch strings.ToUpper(w) {
		case "FROM", "INTO", "UPDATE":
			t := strings.Trim(words[i+1], `"(),;`)
			if t != "" && !strings.ContainsAny(t, "$'") {
				return op, strings.ToLower(t)
			}
		}
	}
	return op, ""
}

// untracedKey marks a context whose statements make no span.
type untracedKey struct{}

// Untraced returns ctx with the store's spans off for the statements made
// under it: a poll that runs every second and mostly finds nothing would
// otherwise export a root span each time, burying the spans of the work.
func Untraced(ctx context.Context) context.Context {
	return context.WithValue(ctx, untracedKey{}, true)
}

func untraced(ctx context.Context) bool { return ctx.Value(untracedKey{}) != nil }

// startTx starts the span of one transaction.
func (db *tracedDB) startTx(ctx context.Context) trace.Span {
	if untraced(ctx) {
		return trace.SpanFromContext(context.Background()) // records nothing
	}
	_, span := db.tracer.Start(ctx, "db.transaction", trace.SpanKindClient)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("db.system.name", db.system))
	}
	return span
}
