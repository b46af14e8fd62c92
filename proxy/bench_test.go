package proxy

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// presign makes n signed requests to url (each with its own nonce) outside
// the timer, so the benchmarks below measure the server side only. A
// non-empty body makes them POSTs.
func presign(b *testing.B, id *identity.Identity, target string, body []byte, n int, now time.Time) []http.Header {
	b.Helper()
	out := make([]http.Header, n)
	for i := range out {
		r, _ := http.NewRequest(methodFor(body), target, bytes.NewReader(body))
		if err := id.Sign(r, identity.SignOptions{Created: now}); err != nil {
			b.Fatal(err)
		}
		out[i] = r.Header
	}
	return out
}

func methodFor(body []byte) string {
	if len(body) > 0 {
		return "POST"
	}
	return "GET"
}

// load sends the requests with 16 concurrent clients and reports req/s.
func load(b *testing.B, target string, body []byte, headers []http.Header) {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
	var next atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			req, _ := http.NewRequest(methodFor(body), target, bytes.NewReader(body))
			req.Header = headers[int(i)%len(headers)]
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// loadCPU is load that also reports cpu-µs/op: the CPU time of the whole
// test process (client, gateway and upstream) per request, which a busy
// machine disturbs far less than the wall time.
func loadCPU(b *testing.B, target string, body []byte, headers []http.Header) {
	b.Helper()
	cpu := processCPU()
	load(b, target, body, headers)
	if cpu > 0 {
		b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
	}
}

// BenchmarkGatewayGET measures small signed GETs through the whole
// proxy.Handler pipeline: profile verification, connection lookup, claim
// lookup, nonce recording, credential injection and forwarding.
func BenchmarkGatewayGET(b *testing.B) {
	g := newGateway(b, gatewayOptions{})
	headers := presign(b, g.agent, g.srv.URL+"/proxy/github/user", nil, b.N, g.clock.now())
	loadCPU(b, g.srv.URL+"/proxy/github/user", nil, headers)
}

// BenchmarkGatewayGETApprovalRules is BenchmarkGatewayGET on a connection
// whose approval_routes, and approval_subjects for other subjects, do not
// match the call: what the rules cost a call they do not hold.
func BenchmarkGatewayGETApprovalRules(b *testing.B) {
	g := newGateway(b, gatewayOptions{})
	headers := presign(b, g.agent, g.srv.URL+"/proxy/ruled/user", nil, b.N, g.clock.now())
	loadCPU(b, g.srv.URL+"/proxy/ruled/user", nil, headers)
}

// BenchmarkGatewayGETTraced is BenchmarkGatewayGET with tracing on: an SDK
// TracerProvider that samples every request and batches its spans to an
// exporter that discards them, so the figure is the cost of making the
// spans (six per request) and propagating the trace, not of a network
// export. BenchmarkGatewayGET is the same pipeline with tracing off.
func BenchmarkGatewayGETTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardSpans{}))
	defer tp.Shutdown(context.Background())
	g := newGateway(b, gatewayOptions{tracer: tp})
	headers := presign(b, g.agent, g.srv.URL+"/proxy/github/user", nil, b.N, g.clock.now())
	loadCPU(b, g.srv.URL+"/proxy/github/user", nil, headers)
}

type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// BenchmarkGatewayPOST is BenchmarkGatewayGET with a 16 KiB body, which the
// gateway reads after authentication and checks against content-digest.
func BenchmarkGatewayPOST(b *testing.B) {
	g := newGateway(b, gatewayOptions{})
	body := bytes.Repeat([]byte("0123456789abcdef"), 1024)
	headers := presign(b, g.agent, g.srv.URL+"/proxy/github/user", body, b.N, g.clock.now())
	load(b, g.srv.URL+"/proxy/github/user", body, headers)
}

// BenchmarkBaselineGET is the reference for BenchmarkGatewayGET: a bare
// httputil.ReverseProxy to the same kind of upstream that does one
// ed25519.Verify per request and nothing else.
func BenchmarkBaselineGET(b *testing.B) {
	up := newUpstream(b)
	target, _ := url.Parse(up.srv.URL)
	pub, key, _ := ed25519.GenerateKey(nil)
	msg := make([]byte, 900) // about the size of a profile signature base
	sig := ed25519.Sign(key, msg)
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }, Transport: NewTransport()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ed25519.Verify(pub, msg, sig) {
			http.Error(w, "bad", http.StatusForbidden)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer srv.Close()
	id, _ := identity.New("baseline")
	headers := presign(b, id, srv.URL+"/user", nil, b.N, time.Now())
	load(b, srv.URL+"/user", nil, headers)
}

// BenchmarkRedaction16K measures what credential redaction costs a signed
// GET with a 16 KiB response through the whole pipeline: "redacted" streams
// the body through the redactor (it has no Content-Encoding, so it loses
// its Content-Length and goes out chunked), "untouched" is the same body
// marked Content-Encoding: br, which the gateway passes on as it is. Both
// have their headers redacted. Compare the two req/s, or on a busy machine
// their cpu-µs/op: the CPU time of the whole test process (client, gateway
// and upstream) per request, which the gateway's RPS follows once it is
// CPU-bound.
func BenchmarkRedaction16K(b *testing.B) {
	body := bytes.Repeat([]byte(`{"id":12345,"name":"repository","private":false},`), 400)[:16<<10]
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/untouched" {
			w.Header().Set("Content-Encoding", "br")
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	defer up.Close()
	g := newGateway(b, gatewayOptions{})
	c := &credvault.Connection{ID: "big", Protocol: "http", BaseURL: up.URL, AuthMode: "bearer", AuthSecretKey: "t", Service: "github"}
	if _, err := g.vault.Create(context.Background(), c, map[string]string{"t": upstreamToken}); err != nil {
		b.Fatal(err)
	}
	for _, path := range []string{"untouched", "redacted"} {
		b.Run(path, func(b *testing.B) {
			target := g.srv.URL + "/proxy/big/" + path
			headers := presign(b, g.agent, target, nil, b.N, g.clock.now())
			cpu := processCPU()
			load(b, target, nil, headers)
			if cpu > 0 {
				b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
			}
		})
	}
}

// BenchmarkActivityReporting measures what reporting each decision to the
// control plane costs the gateway: "off" is BenchmarkGatewayGET, "on" the
// same requests with Config.Activity set to a real pairing.Reporter
// (queue, route template, a batch sent signed every second) whose control
// plane reads each batch and discards it. Compare req/s, or on a busy
// machine cpu-µs/op (the whole process's CPU time per request, the
// reports' JSON and signing included).
func BenchmarkActivityReporting(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(`{"accepted":0}`))
	}))
	defer sink.Close()
	gwID, _ := identity.New("gw-host")
	reporter, err := pairing.NewReporter(pairing.ReporterConfig{ControlPlaneURL: sink.URL, Identity: gwID})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go reporter.Run(ctx)
	for _, mode := range []struct {
		name     string
		activity ActivityRecorder
	}{{"off", nil}, {"on", toReporter{reporter}}} {
		b.Run(mode.name, func(b *testing.B) {
			g := newGateway(b, gatewayOptions{activity: mode.activity})
			target := g.srv.URL + "/proxy/github/repos/octo/issues/42"
			headers := presign(b, g.agent, target, nil, b.N, g.clock.now())
			loadCPU(b, target, nil, headers)
		})
	}
	if reporter.Dropped() > 0 {
		b.Logf("%d records dropped: the queue filled between two sends", reporter.Dropped())
	}
}

// BenchmarkActivityReportingCPU is BenchmarkActivityReporting without
// the network: requests are served by calling the Handler, the upstream
// answers in process and the reports go to a RoundTripper that reads and
// discards them, so cpu-µs/op is the gateway's own CPU time per request,
// the reporter's background work included. Once the gateway is
// CPU-bound its req/s is the inverse of that time (req/cpu-s, per core),
// so the difference between "on" and "off" is what reporting costs its
// req/s, measured in a way a busy machine disturbs far less than wall
// time.
func BenchmarkActivityReportingCPU(b *testing.B) {
	gwID, _ := identity.New("gw-host")
	reporter, err := pairing.NewReporter(pairing.ReporterConfig{ControlPlaneURL: "http://control-plane.invalid", Identity: gwID,
		Transport: answering{`{"accepted":500}`}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go reporter.Run(ctx)
	for _, mode := range []struct {
		name     string
		activity ActivityRecorder
	}{{"off", nil}, {"on", toReporter{reporter}}} {
		b.Run(mode.name, func(b *testing.B) {
			g := newGateway(b, gatewayOptions{activity: mode.activity, transport: answering{`{"id":42,"title":"bug"}`}})
			target := g.srv.URL + "/proxy/github/repos/octo/issues/42"
			headers := presign(b, g.agent, target, nil, b.N, g.clock.now())
			b.ReportAllocs()
			cpu := processCPU()
			b.ResetTimer()
			for i := range b.N {
				req := httptest.NewRequest("GET", target, nil)
				req.Header = headers[i]
				w := httptest.NewRecorder()
				g.handler.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
			b.StopTimer()
			if cpu > 0 {
				perOp := float64((processCPU() - cpu).Microseconds()) / float64(b.N)
				b.ReportMetric(perOp, "cpu-µs/op")
				// What one fully used core serves: the req/s of a
				// CPU-bound gateway, per core.
				b.ReportMetric(1e6/perOp, "req/cpu-s")
			}
		})
	}
	if reporter.Dropped() > 0 {
		b.Logf("%d records dropped: the queue filled between two sends", reporter.Dropped())
	}
}

// answering is a RoundTripper that reads the request's body and answers
// 200 with body, in process.
type answering struct{ body string }

func (a answering) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: r,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(a.body)),
		ContentLength: int64(len(a.body))}, nil
}

// toReporter is the gateway's adapter from the Handler's decisions to the
// reporter.
type toReporter struct{ r *pairing.Reporter }

func (t toReporter) RecordActivity(a Activity) {
	t.r.Record(pairing.Activity{At: a.At, AgentName: a.AgentName, AgentKey: a.AgentKey, Connection: a.Connection,
		Service: a.Service, MCP: a.MCP, Method: a.Method, Route: a.Route, Allowed: a.Allowed, Reason: a.Reason,
		Status: a.Status, Latency: a.Latency})
}

// BenchmarkActivityRequestPath is what Config.Activity adds to the
// request path itself: the note a request carries, the route template and
// the record handed to the recorder (here one that keeps nothing; the
// reporter's own share is pairing's BenchmarkReport).
func BenchmarkActivityRequestPath(b *testing.B) {
	g := newGateway(b, gatewayOptions{activity: discardActivity{}})
	caller := &identity.Caller{Name: "weather-bot", PublicKey: g.agent.PublicKeyString()}
	r := httptest.NewRequest("GET", "/proxy/github/repos/octo/issues/42", nil)
	rt := route{connID: "github", rest: "/repos/octo/issues/42"}
	b.ReportAllocs()
	for range b.N {
		start := time.Now()
		req := r.WithContext(context.WithValue(r.Context(), activityKey{}, &activityNote{start: start, rt: rt}))
		g.handler.recordActivity(req, caller, "github", true, "", 200)
	}
}

type discardActivity struct{}

func (discardActivity) RecordActivity(Activity) {}

// BenchmarkOAuthCachedGET is BenchmarkGatewayGET on a connection in the
// oauth2_client_credentials mode whose token is cached: compare the two
// to see what the token cache adds to a call (it should be within noise).
func BenchmarkOAuthCachedGET(b *testing.B) {
	g := newGateway(b, gatewayOptions{})
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"benchmark-access-token","token_type":"Bearer","expires_in":86400}`)
	}))
	defer tokens.Close()
	c := &credvault.Connection{ID: "m2m", Service: "github", BaseURL: g.up.srv.URL + "/api", AuthMode: credvault.AuthOAuth2ClientCredentials,
		OAuthTokenURL: tokens.URL, OAuthClientID: "gateway", AuthSecretKey: "client_secret"}
	if _, err := g.vault.Create(context.Background(), c, map[string]string{"client_secret": upstreamToken}); err != nil {
		b.Fatal(err)
	}
	res, _ := g.vault.Lookup("m2m")
	if _, err := g.tokens.Token(context.Background(), res, g.agent.Namespace); err != nil { // cached before the clock starts
		b.Fatal(err)
	}
	headers := presign(b, g.agent, g.srv.URL+"/proxy/m2m/user", nil, b.N, g.clock.now())
	loadCPU(b, g.srv.URL+"/proxy/m2m/user", nil, headers)
}
