package controlplane

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/idnhq/idn/kit/testlog"
	"github.com/idnhq/idn/kit/textcap"
	"github.com/idnhq/idn/kit/tracing/tracingtest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Attack: a stranger sends requests whose methods are tokens of its own,
// each 4 KB. They add one metric series between them, and each costs a
// bounded request log line and span.
func TestInventedMethodsAreBounded(t *testing.T) {
	t.Parallel()
	var logs testlog.Buffer
	rec := tracingtest.NewReceiver(t)
	tp := rec.Provider(t)
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), func(c *Config) {
		c.Metrics = prometheus.NewRegistry()
		c.AccessLog = slog.New(slog.NewJSONHandler(&logs, nil))
		c.TracerProvider = tp
	})
	const requests = 20
	for i := range requests {
		e.do(fmt.Sprintf("M%04d%s", i, strings.Repeat("X", 4<<10)), "/v1/services/svc_x", nil)
	}
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(e.srv.obs.requests); n > 2 {
		t.Errorf("%d request series after %d invented methods, want them under one", n, requests)
	}
	if got := testutil.ToFloat64(e.srv.obs.requests.WithLabelValues("unmatched", "_OTHER", "405")) +
		testutil.ToFloat64(e.srv.obs.requests.WithLabelValues("unmatched", "_OTHER", "404")); got != requests {
		t.Errorf("requests{method=_OTHER} = %v, want %d", got, requests)
	}
	if per := len(logs.Bytes()) / requests; per > 1024 {
		t.Errorf("request log: %d bytes a request", per)
	}
	spans := rec.Spans()
	if len(spans) < requests {
		t.Fatalf("%d spans for %d requests", len(spans), requests)
	}
	for _, s := range spans {
		if len(s.Name) > textcap.Name || len(s.Attributes["http.request.method"]) > textcap.Name {
			t.Fatalf("span named %.40q… (%d bytes), method %d bytes", s.Name, len(s.Name), len(s.Attributes["http.request.method"]))
		}
	}
}
