// Package tracingtest is an in-process OTLP/HTTP trace receiver for tests:
// an httptest server that decodes the exporter's protobuf requests, and an
// SDK TracerProvider that exports to it.
package tracingtest

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, ids in hex (ParentID empty for a root).
type Span struct {
	Name, TraceID, SpanID, ParentID string
	Attributes                      map[string]string
	Error                           bool // status code ERROR
}

// Receiver collects the spans exported to it.
type Receiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []Span
}

// NewReceiver starts a receiver, closed at the test's end.
func NewReceiver(t testing.TB) *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.export))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *Receiver) export(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var msg coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &msg)
	}
	if req.URL.Path != "/v1/traces" || err != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				got := Span{Name: s.Name, TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
					ParentID: hex.EncodeToString(s.ParentSpanId), Attributes: map[string]string{},
					Error: s.Status.GetCode() == 2}
				for _, a := range s.Attributes {
					got.Attributes[a.Key] = value(a.Value)
				}
				r.spans = append(r.spans, got)
			}
		}
	}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// value is an attribute's value as text (strings and integers are all the
// gateway and control plane set).
func value(v *commonpb.AnyValue) string {
	if iv, ok := v.GetValue().(*commonpb.AnyValue_IntValue); ok {
		return strconv.FormatInt(iv.IntValue, 10)
	}
	return v.GetStringValue()
}

// URL is the receiver's base URL (an OTEL_EXPORTER_OTLP_ENDPOINT).
func (r *Receiver) URL() string { return r.srv.URL }

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Provider returns an SDK TracerProvider that exports every span to r over
// OTLP/HTTP as it ends; it is shut down at the test's end. Call its
// ForceFlush before reading Spans.
func (r *Receiver) Provider(t testing.TB) *sdktrace.TracerProvider {
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(r.srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}
