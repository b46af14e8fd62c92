package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestClaimSubmissionContinuesTheTrace: an agent's request carrying a
// traceparent makes the gateway file a claim, and the control plane's span
// of POST /v1/claims continues that trace, a child of the gateway's
// gateway.claim span, instead of starting a new root.
func TestClaimSubmissionContinuesTheTrace(t *testing.T) {
	t.Parallel()
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	cp := newControlPlaneWith(t, func(c *controlplane.Config) { c.TracerProvider = tp })
	agent, other := newIdentity(t, "acme"), newIdentity(t, "acme")
	seeded := cp.seed(`{"namespaces":["acme"],"services":[{"slug":"github","owner":"acme"}]}`)
	upstream := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, "ok") }))
	defer upstream.Close()
	gw := startGateway(t, &world{cp: cp, apiKey: seeded.APIKeys["github"], agent: agent},
		func(c *gateway.Config) { c.TracerProvider = tp }, bearer("github", upstream.URL, "upstream-token"))
	client := &http.Client{Timeout: 10 * time.Second}
	// Another agent waits for the claims' first load, so that the traced
	// request is the one that files its claim.
	eventually(t, 5*time.Second, "the claims' first load", func() bool {
		return call(t, client, "GET", gw.url+"/proxy/github/repos", other, nil).status == http.StatusForbidden
	})

	req, _ := http.NewRequest("GET", gw.url+"/proxy/github/repos", bytes.NewReader(nil))
	req.Header.Set("Traceparent", "00-"+traceID+"-"+parentID+"-01")
	if err := agent.Sign(req, identity.SignOptions{}); err != nil {
		t.Fatal(err)
	}
	a, err := do(client, req)
	if err != nil {
		t.Fatal(err)
	}
	a.want(t, http.StatusForbidden, "AUTH_CLAIM_REQUIRED")

	var claim, submit sdktrace.ReadOnlySpan
	eventually(t, 5*time.Second, "the spans of the submission", func() bool {
		for _, s := range spans.GetSpans().Snapshots() {
			if s.SpanContext().TraceID().String() != traceID {
				continue
			}
			switch {
			case s.Name() == "gateway.claim":
				claim = s
			case s.Name() == "POST /v1/claims" && s.SpanKind() == trace.SpanKindServer:
				submit = s
			}
		}
		return claim != nil && submit != nil
	})
	if submit.Parent().SpanID() != claim.SpanContext().SpanID() {
		t.Fatalf("POST /v1/claims has parent %s, want the gateway.claim span %s", submit.Parent().SpanID(), claim.SpanContext().SpanID())
	}
}

func newIdentity(t testing.TB, namespace string) *identity.Identity {
	t.Helper()
	id, err := identity.New(namespace)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
