// Package otlpexport builds a binary's OpenTelemetry TracerProvider from
// the standard OTEL_* variables: an SDK provider that batches spans to an
// OTLP/HTTP (protobuf) exporter when an OTLP endpoint is set, and nothing
// at all, so the libraries make no span, when none is or when
// OTEL_SDK_DISABLED is true. Only the binaries use it; the libraries take
// a trace.TracerProvider in their Config.
package otlpexport

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/idnhq/idn/kit/envconf"
	"github.com/idnhq/idn/kit/textcap"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Settings are the variables read by Read.
type Settings struct {
	endpoint string // the traces URL; "" means tracing off
	service  string
}

// Read reads the OTEL_* variables the binaries honour; service is
// OTEL_SERVICE_NAME's default. The exporter reads the rest of the
// standard OTLP variables (headers, timeout, compression, certificates)
// itself, and the SDK the sampler and batch ones (OTEL_TRACES_SAMPLER,
// OTEL_BSP_*).
func Read(r *envconf.Reader, service string) Settings {
	base := r.Raw("OTEL_EXPORTER_OTLP_ENDPOINT", "OTLP/HTTP base URL; traces go to its /v1/traces. Setting it turns tracing on")
	traces := r.Raw("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTLP/HTTP traces URL, used as is; wins over OTEL_EXPORTER_OTLP_ENDPOINT. Setting it turns tracing on")
	r.OneOf("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", []string{"http/protobuf"}, "OTLP protocol")
	r.OneOf("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf", []string{"http/protobuf"}, "OTLP protocol for traces")
	disabled := r.Bool("OTEL_SDK_DISABLED", false, "true turns tracing off whatever else is set")
	s := Settings{service: r.String("OTEL_SERVICE_NAME", service, "service.name of the exported spans")}
	switch {
	case disabled:
	case strings.TrimSpace(traces) != "":
		s.endpoint = strings.TrimSpace(traces)
	case strings.TrimSpace(base) != "":
		s.endpoint = tracesURL(strings.TrimSpace(base))
	}
	return s
}

// tracesURL is the traces URL of an OTLP base URL: /v1/traces appended to
// its path, so that a query stays a query.
func tracesURL(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return strings.TrimSuffix(base, "/") + "/v1/traces" // the exporter refuses it
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	u.RawPath = ""
	return u.String()
}

// Shown is the endpoint as a log may show it: scheme, host and path, without
// the user information, query or fragment, which may carry a token. It is
// "" when tracing is off.
func (s Settings) Shown() string {
	if s.endpoint == "" {
		return ""
	}
	u, err := url.Parse(s.endpoint)
	if err != nil || u.Host == "" {
		return "(an endpoint that is not a URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// On reports whether an OTLP endpoint is set and tracing not disabled.
func (s Settings) On() bool { return s.endpoint != "" }

// spanLimits are the SDK's limits (OTEL_SPAN_* variables) with attribute
// values cut at textcap.Text characters at most: the libraries clip what
// a caller chose, and this holds for any attribute they did not.
func spanLimits() sdktrace.SpanLimits {
	l := sdktrace.NewSpanLimits()
	if l.AttributeValueLengthLimit < 0 || l.AttributeValueLengthLimit > textcap.Text {
		l.AttributeValueLengthLimit = textcap.Text
	}
	return l
}

// Provider returns the TracerProvider to hand the libraries and a shutdown
// that exports the spans still batched, for up to 5 s; the binary calls it
// on exit. Off, the provider is nil (the libraries make no span) and
// shutdown does nothing. On, it logs that tracing is on and where spans go
// (Shown); export failures are logged to logger as warnings.
func (s Settings) Provider(ctx context.Context, version string, logger *slog.Logger) (trace.TracerProvider, func(), error) {
	if !s.On() {
		return nil, func() {}, nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(s.endpoint))
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing: span export failed", "error", err.Error())
	}))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithRawSpanLimits(spanLimits()),
		sdktrace.WithResource(resource.NewSchemaless(
			attribute.String("service.name", s.service), attribute.String("service.version", version))),
	)
	logger.Info("tracing on: spans are exported over OTLP/HTTP", "endpoint", s.Shown(), "service", s.service)
	shutdown := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			logger.Warn("tracing: exporting the last spans failed", "error", err.Error())
		}
	}
	return tp, shutdown, nil
}
