package proxy

import (
	"crypto/ed25519"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/identity"
)

// presign makes n signed GETs to url (each with its own nonce) outside the
// timer, so both benchmarks below measure the server side only.
func presign(b *testing.B, id *identity.Identity, target string, n int, now time.Time) []http.Header {
	b.Helper()
	out := make([]http.Header, n)
	for i := range out {
		r, _ := http.NewRequest("GET", target, nil)
		if err := id.Sign(r, identity.SignOptions{Created: now}); err != nil {
			b.Fatal(err)
		}
		out[i] = r.Header
	}
	return out
}

// load sends the requests with 16 concurrent clients and reports req/s.
func load(b *testing.B, target string, headers []http.Header) {
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
			req, _ := http.NewRequest("GET", target, nil)
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

// BenchmarkGatewayGET measures small signed GETs through the whole
// proxy.Handler pipeline: profile verification, connection lookup, claim
// lookup, nonce recording, credential injection and forwarding.
func BenchmarkGatewayGET(b *testing.B) {
	g := newGateway(b, gatewayOptions{})
	headers := presign(b, g.agent, g.srv.URL+"/proxy/github/user", b.N, g.clock.now())
	load(b, g.srv.URL+"/proxy/github/user", headers)
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
	headers := presign(b, id, srv.URL+"/user", b.N, time.Now())
	load(b, srv.URL+"/user", headers)
}
