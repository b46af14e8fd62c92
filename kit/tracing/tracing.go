// Package tracing is the OpenTelemetry plumbing shared by the gateway and
// the control plane: a Tracer that costs nothing when tracing is off, and
// W3C Trace Context (traceparent, tracestate) propagation over HTTP
// headers.
//
// Tracing is off when the library's Config names no TracerProvider. Off,
// Start returns its context unchanged and a span that records nothing,
// and Extract and Inject touch nothing, so a request's headers pass
// through as they came and no allocation is made.
package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracer starts spans; its zero value is off.
type Tracer struct{ t trace.Tracer }

// New returns the Tracer of the instrumentation scope name (the package
// path) from tp; nil tp means off.
func New(tp trace.TracerProvider, name string) Tracer {
	if tp == nil {
		return Tracer{}
	}
	return Tracer{t: tp.Tracer(name)}
}

// On reports whether spans are made.
func (t Tracer) On() bool { return t.t != nil }

// off is returned by Start when tracing is off: a stored interface value, so
// returning it allocates nothing.
var off trace.Span = noop.Span{}

// Start starts a span of kind named name as a child of ctx's span. Off, it
// returns ctx and a span that records nothing.
func (t Tracer) Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if t.t == nil {
		return ctx, off
	}
	return t.t.Start(ctx, name, trace.WithSpanKind(kind))
}

// propagator reads and writes traceparent and tracestate only: baggage is
// not carried, so an agent cannot have the gateway hand data of its
// choosing to an upstream under another header.
var propagator = propagation.TraceContext{}

// Extract returns ctx with the remote span context of h's traceparent and
// tracestate, when tracing is on and they are valid.
func (t Tracer) Extract(ctx context.Context, h http.Header) context.Context {
	if t.t == nil {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Inject writes ctx's span context into h as traceparent and tracestate,
// replacing whatever h held, when tracing is on.
func (t Tracer) Inject(ctx context.Context, h http.Header) {
	if t.t == nil {
		return
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Transport returns base (nil means http.DefaultTransport) wrapped so that
// each request carries its context's span as traceparent and tracestate,
// set on a copy, so the server it calls continues the trace. Off, it
// returns base.
func (t Tracer) Transport(base http.RoundTripper) http.RoundTripper {
	if t.t == nil {
		return base
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return propagating{base}
}

// propagating is Tracer.Transport's round tripper.
type propagating struct{ base http.RoundTripper }

func (p propagating) RoundTrip(r *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(r.Context()).IsValid() {
		return p.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	propagator.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	return p.base.RoundTrip(r)
}

// Fail marks span failed with code, a stable error code: never an error's
// text, which may quote a URL or a value the request carried.
func Fail(span trace.Span, code string) {
	if !span.IsRecording() {
		return
	}
	span.SetStatus(codes.Error, code)
	span.SetAttributes(ErrorCode.String(code))
}

// Attribute keys the gateway and the control plane set.
const (
	ErrorCode    attribute.Key = "idn.error.code"
	ConnectionID attribute.Key = "idn.connection_id"
	Namespace    attribute.Key = "idn.namespace"
)
