package otlpexport

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/idnhq/idn/kit/envconf"
	"github.com/idnhq/idn/kit/textcap"
	"github.com/idnhq/idn/kit/tracing/tracingtest"
	"go.opentelemetry.io/otel/attribute"
)

func read(env map[string]string) (Settings, error) {
	r := envconf.New(func(k string) string { return env[k] })
	s := Read(r, "idn-test")
	return s, r.Err()
}

func TestOffUnlessAnEndpointIsSet(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"nothing set":       {},
		"only service name": {"OTEL_SERVICE_NAME": "x"},
		"sdk disabled":      {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := read(env)
			if err != nil {
				t.Fatal(err)
			}
			tp, shutdown, err := s.Provider(context.Background(), "v", slog.New(slog.DiscardHandler))
			if err != nil || tp != nil || shutdown == nil {
				t.Fatalf("provider %v, error %v: want none", tp, err)
			}
		})
	}
}

func TestEndpoints(t *testing.T) {
	for _, c := range []struct{ env map[string]string }{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}},
	} {
		s, err := read(c.env)
		if err != nil || s.endpoint != "http://collector:4318/v1/traces" {
			t.Errorf("%v: endpoint %q, error %v", c.env, s.endpoint, err)
		}
	}
	if s, _ := read(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/otlp?tenant=a"}); s.endpoint != "http://collector:4318/otlp/v1/traces?tenant=a" {
		t.Errorf("a base URL with a query: endpoint %q", s.endpoint)
	}
	if _, err := read(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}); err == nil {
		t.Error("grpc accepted: only http/protobuf is exported")
	}
}

// With an endpoint set, spans reach an OTLP/HTTP receiver by the time
// shutdown returns.
func TestExportsToTheEndpoint(t *testing.T) {
	rec := tracingtest.NewReceiver(t)
	s, err := read(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rec.URL()})
	if err != nil {
		t.Fatal(err)
	}
	tp, shutdown, err := s.Provider(context.Background(), "v1", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer("test").Start(context.Background(), "exported")
	span.End()
	shutdown()
	if spans := rec.Spans(); len(spans) != 1 || spans[0].Name != "exported" {
		t.Fatalf("received %+v", spans)
	}
}

// An attribute value a caller chose (a 100 KB tool name) is exported cut
// to textcap.Text characters, or to the shorter limit the operator set.
func TestAttributeValuesAreBounded(t *testing.T) {
	huge := strings.Repeat("x", 100_000)
	for _, c := range []struct {
		name, env string
		want      int
	}{
		{"default", "", textcap.Text},
		{"a larger limit is not taken", "1000000", textcap.Text},
		{"a smaller limit is", "64", 64},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", c.env)
			rec := tracingtest.NewReceiver(t)
			s, err := read(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rec.URL()})
			if err != nil {
				t.Fatal(err)
			}
			tp, shutdown, err := s.Provider(context.Background(), "v1", slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			_, span := tp.Tracer("test").Start(context.Background(), "call")
			span.SetAttributes(attribute.String("mcp.tool.name", huge))
			span.End()
			shutdown()
			spans := rec.Spans()
			if len(spans) != 1 {
				t.Fatalf("received %d spans", len(spans))
			}
			if got := len(spans[0].Attributes["mcp.tool.name"]); got != c.want {
				t.Fatalf("exported a %d-byte value, want %d", got, c.want)
			}
		})
	}
}

// Shown keeps what says where spans go and drops what may carry a secret.
func TestShownEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pass@collector.example:4318/v1/traces?token=s3cret#frag": "https://collector.example:4318/v1/traces",
		"http://collector:4318/": "http://collector:4318/v1/traces",
		"collector:4318":         "(an endpoint that is not a URL)",
	} {
		s, err := read(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": in})
		if in == "http://collector:4318/" {
			s, err = read(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": in})
		}
		if err != nil || s.Shown() != want {
			t.Errorf("%q shown as %q (%v), want %q", in, s.Shown(), err, want)
		}
	}
}
