package controlplane

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/tracing/tracingtest"
)

// A signed request gets a server span named for its route pattern, child
// of the caller's span, with the store's statements as its children; no
// span carries the path's identifiers, the signature or a statement's
// arguments.
func TestTracingSignedRequest(t *testing.T) {
	t.Parallel()
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	rec := tracingtest.NewReceiver(t)
	tp := rec.Provider(t)
	cfg := storeConfig(t, ProviderSQLite)
	cfg.TracerProvider = tp
	e := newEnv(t, openStore(t, cfg), func(c *Config) { c.TracerProvider = tp })
	agent := newAgent(t, "acme")
	seeded := e.seed(map[string]any{
		"namespaces": []string{"acme"},
		"services":   []map[string]string{{"slug": "github", "owner": "acme"}},
		"claims":     []map[string]string{{"namespace": "acme", "service": "github", "public_key": pubKey(agent)}},
	})

	var signature string
	key := seeded.APIKeys["github"]
	e.do("GET", "/v1/verify?namespace=acme&service=github&public_key="+url.QueryEscape(pubKey(agent)), nil, withKey(key),
		signedBy(e.agent, identity.SignOptions{Nonce: "nonce-traced-0001"}), func(r *http.Request) {
			signature = r.Header.Get("Signature")
			r.Header.Set("Traceparent", "00-"+traceID+"-"+parentID+"-01")
		}).want(t, http.StatusOK, "")
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}

	var handler tracingtest.Span
	var db []tracingtest.Span
	spans := rec.Spans()
	for _, s := range spans {
		if s.TraceID == traceID && s.ParentID == parentID {
			handler = s
		}
	}
	if handler.Name != "GET /v1/verify" || handler.Attributes["http.response.status_code"] != "200" {
		t.Fatalf("handler span %+v, want GET /v1/verify answered 200, child of the caller's span", handler)
	}
	for _, s := range spans {
		if s.ParentID == handler.SpanID {
			db = append(db, s)
		}
	}
	names := map[string]bool{}
	for _, s := range db {
		names[s.Name] = true
		if s.Attributes["db.system.name"] != "sqlite" || s.Attributes["db.operation.name"] == "" {
			t.Errorf("db span %+v lacks db.system.name or db.operation.name", s)
		}
	}
	if !names["INSERT nonces"] || !names["SELECT claims"] || len(names) < 3 {
		t.Errorf("db spans under the handler: %v, want the API key's lookup, INSERT nonces and SELECT claims", names)
	}
	for _, s := range spans {
		for k, v := range s.Attributes {
			for _, secret := range []string{"acme", signature, "nonce-traced-0001", pubKey(agent), key} {
				if strings.Contains(v, secret) {
					t.Errorf("span %s attribute %s = %q carries %q", s.Name, k, v, secret)
				}
			}
		}
	}
}

// The webhook worker's poll, which runs every second and finds nothing
// when no webhook is configured, exports no span: it would bury the
// spans of the work under one unparented UPDATE a second.
func TestTracingIdleWebhookPoll(t *testing.T) {
	t.Parallel()
	rec := tracingtest.NewReceiver(t)
	tp := rec.Provider(t)
	cfg := storeConfig(t, ProviderSQLite)
	cfg.TracerProvider = tp
	e := newEnv(t, openStore(t, cfg), func(c *Config) {
		withWebhooks(nil)(c)
		c.TracerProvider = tp
	})
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := len(rec.Spans()) // the server's start
	for range 3 {
		if n, err := e.srv.hooks.DeliverDue(t.Context()); err != nil || n != 0 {
			t.Fatalf("DeliverDue = %d, %v", n, err)
		}
	}
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if spans := rec.Spans(); len(spans) != before {
		t.Errorf("the idle poll exported %+v", spans[before:])
	}
}
