package controlplane

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/identity"
)

// countingBody is a request body of left bytes (an unfinished JSON
// string, so a decoder keeps reading) that counts what the server reads
// from it, without holding the bytes itself.
type countingBody struct {
	left int64
	read atomic.Int64
}

const countingPrefix = `{"credential":"`

var filler = bytes.Repeat([]byte("a"), 4096)

func (b *countingBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), b.left))
	i := 0
	if done := b.read.Load(); done < int64(len(countingPrefix)) {
		i = copy(p[:n], countingPrefix[done:])
	}
	for i < n {
		i += copy(p[i:n], filler)
	}
	b.left -= int64(n)
	b.read.Add(int64(n))
	return n, nil
}

// signedHeaders signs a request for method and path on the test host
// (with a small body when withBody) and returns its headers.
func signedHeaders(t *testing.T, id *identity.Identity, method, path string, withBody bool) http.Header {
	t.Helper()
	var body io.Reader
	if withBody {
		body = strings.NewReader(`{"namespace":"acme"}`)
	}
	req, err := http.NewRequest(method, "http://cp.test"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Sign(req, identity.SignOptions{}); err != nil {
		t.Fatal(err)
	}
	return req.Header
}

// serveDirect hands one request to the server in process, so the bytes it
// reads from the body are exactly the handlers' reads.
func serveDirect(srv *Server, method, path string, h http.Header, body io.Reader, declared int64) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://cp.test"+path, body)
	req.RequestURI = path
	req.ContentLength = declared
	for k, v := range h {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	return rec
}

// TestNoBodyByteReadBeforeAuthentication: a request whose sender has not
// been authenticated (signature, nonce and service key; or owner session)
// makes the control plane read no byte of its body, and an anonymous route
// reads no more than its small limit.
func TestNoBodyByteReadBeforeAuthentication(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, ProviderSQLite)
	_, key := claimWorld(e)
	const mib = 1 << 20
	json := func(h http.Header) http.Header {
		if h == nil {
			h = http.Header{}
		}
		h.Set("Content-Type", "application/json")
		return h
	}
	forged := signedHeaders(t, e.agent, "POST", "/v1/claims", true)
	forged.Set("Signature", strings.Replace(forged.Get("Signature"), ":", ":AAAA", 1))
	replayed := signedHeaders(t, e.agent, "POST", "/v1/claims", true)
	replayed.Set("Authorization", "Bearer "+key)
	e.do("POST", "/v1/claims", map[string]any{"namespace": "acme"}, func(r *http.Request) {
		for k, v := range replayed {
			r.Header[k] = v
		}
		r.Host = "cp.test"
	})
	withKey := func(h http.Header, k string) http.Header { h.Set("Authorization", "Bearer "+k); return h }

	rows := []struct {
		name, method, path string
		header             http.Header
		declared           int64 // -1: sent chunked
		status             int
		code               string
		maxRead            int64
	}{
		{"unsigned_claim_submission", "POST", "/v1/claims", json(nil), mib, 403, "AUTH_IDENTITY_INVALID", 0},
		{"unsigned_chunked_claim_submission", "POST", "/v1/claims", json(nil), -1, 403, "AUTH_IDENTITY_INVALID", 0},
		{"forged_signature", "POST", "/v1/claims", json(forged), mib, 403, "AUTH_SIGNATURE_INVALID", 0},
		{"signature_made_for_another_route", "POST", "/v1/claims", json(signedHeaders(t, e.agent, "POST", "/v1/verify", true)), mib, 403, "AUTH_SIGNATURE_INVALID", 0},
		{"replayed_nonce", "POST", "/v1/claims", json(replayed), mib, 403, "AUTH_REPLAY_DETECTED", 0},
		{"valid_signature_without_service_key", "POST", "/v1/claims", json(signedHeaders(t, e.agent, "POST", "/v1/claims", true)), mib, 401, "API_KEY_INVALID", 0},
		{"valid_signature_with_unknown_service_key", "POST", "/v1/claims",
			json(withKey(signedHeaders(t, e.agent, "POST", "/v1/claims", true), "idn_sk_unknown")), -1, 401, "API_KEY_INVALID", 0},
		{"body_smuggled_onto_a_signed_get", "GET", "/v1/namespaces/claims",
			withKey(signedHeaders(t, e.agent, "GET", "/v1/namespaces/claims", false), key), mib, 403, "AUTH_SIGNED_COMPONENTS_INVALID", 0},
		{"session_route_without_cookie", "POST", "/v1/services", json(nil), mib, 401, "ADMIN_UNAUTHORIZED", 0},
		{"session_route_with_forged_cookie", "POST", "/v1/services", json(http.Header{"Cookie": {SessionCookie + "=eyJhbGciOiJIUzI1NiJ9.e30.AAAA"}}), -1, 401, "ADMIN_UNAUTHORIZED", 0},
		{"signup_declaring_a_large_body", "POST", "/v1/auth/signup", json(http.Header{"Origin": {testOrigin}}), mib, 413, "REQUEST_BODY_TOO_LARGE", 0},
		{"signup_with_a_large_chunked_body", "POST", "/v1/auth/signup", json(http.Header{"Origin": {testOrigin}}), -1, 413, "REQUEST_BODY_TOO_LARGE", 64<<10 + 1},
		{"login_with_a_large_chunked_body", "POST", "/v1/auth/login", json(http.Header{"Origin": {testOrigin}}), -1, 413, "REQUEST_BODY_TOO_LARGE", 64<<10 + 1},
		// The one row that authenticates: only now is the body read, and
		// then checked against the signed digest.
		{"verified_caller_sends_another_body", "POST", "/v1/claims",
			json(withKey(signedHeaders(t, e.agent, "POST", "/v1/claims", true), key)), mib, 403, "AUTH_SIGNATURE_INVALID", mib},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			body := &countingBody{left: mib}
			rec := serveDirect(e.srv, row.method, row.path, row.header, body, row.declared)
			r := resp{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
			r.want(t, row.status, row.code)
			if got := body.read.Load(); got > row.maxRead {
				t.Fatalf("read %d body bytes, want at most %d", got, row.maxRead)
			}
			if used := e.srv.kit.Bodies.Used(); used != 0 {
				t.Fatalf("%d body bytes still counted after the request", used)
			}
		})
	}
}

// TestUnauthenticatedUploadsHoldNoMemory sends 200 concurrent 1 MiB claim
// submissions with a real agent's identity headers and a forged signature
// over real connections and samples the heap: the control plane buffers
// none of them.
func TestUnauthenticatedUploadsHoldNoMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("memory harness")
	}
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	const clients, size = 200, 1 << 20
	tr := &http.Transport{MaxConnsPerHost: clients, MaxIdleConnsPerHost: clients}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	signedReq, _ := http.NewRequest("POST", e.ts.URL+"/v1/claims", strings.NewReader(`{"namespace":"acme"}`))
	if err := e.agent.Sign(signedReq, identity.SignOptions{}); err != nil {
		t.Fatal(err)
	}
	forged := signedReq.Header
	forged.Set("Signature", "sig1=:"+strings.Repeat("A", 86)+"==:")

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	ctx, stop := context.WithCancel(context.Background())
	peak := make(chan uint64)
	go func() {
		var m runtime.MemStats
		var top uint64
		tick := time.NewTicker(2 * time.Millisecond) // a sampling period, not a wait
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&m)
			top = max(top, m.HeapInuse)
			select {
			case <-ctx.Done():
				peak <- top
				return
			case <-tick.C:
			}
		}
	}()
	var wg sync.WaitGroup
	var refused, other atomic.Int64
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", e.ts.URL+"/v1/claims", &countingBody{left: size})
			req.ContentLength = size
			req.Header = forged.Clone()
			req.Header.Set("Content-Type", "application/json")
			res, err := client.Do(req)
			if err != nil { // the server may close before the client has sent it all
				refused.Add(1)
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusForbidden {
				refused.Add(1)
			} else {
				other.Add(1)
			}
		}()
	}
	wg.Wait()
	stop()
	top := <-peak
	grew := int64(top) - int64(before.HeapInuse)
	t.Logf("%d concurrent forged-signature %d KiB uploads: heap in use %d MiB before, peak %d MiB (+%.1f MiB)",
		clients, size>>10, before.HeapInuse>>20, top>>20, float64(grew)/(1<<20))
	if other.Load() != 0 || refused.Load() != clients {
		t.Fatalf("refused %d, other answers %d", refused.Load(), other.Load())
	}
	// Buffering the bodies took the heap up by 220 MiB; what remains is
	// the state of 200 connections on both sides and the signature checks.
	if grew > 48<<20 {
		t.Fatalf("heap grew by %d MiB", grew>>20)
	}
}

// TestInflightBodyCap: the body bytes held at once across requests are
// capped; a request that would pass the cap is answered 503 with
// Retry-After, and every byte is given back when its request ends.
func TestInflightBodyCap(t *testing.T) {
	t.Parallel()
	const limit = 16 << 10
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), func(c *Config) { c.MaxInflightBodyBytes = limit })
	owner, key := claimWorld(e)
	session := http.Header{"Cookie": {SessionCookie + "=" + e.sessions["acme"]}, "Content-Type": {"application/json"}}

	t.Run("one owner body over the cap", func(t *testing.T) {
		r := e.do("POST", "/v1/services", map[string]any{"name": strings.Repeat("a", 2*limit)}, owner)
		r.want(t, http.StatusServiceUnavailable, "REQUEST_BODY_CAPACITY_EXHAUSTED")
		if r.header.Get("Retry-After") != "1" {
			t.Fatalf("Retry-After = %q", r.header.Get("Retry-After"))
		}
	})
	t.Run("one signed body over the cap", func(t *testing.T) {
		b := submitBody("acme", pubKey(newAgent(t, "acme")), "github")
		b["agent_name"] = strings.Repeat("a", 2*limit)
		e.signed("POST", "/v1/claims", b, withKey(key)).want(t, http.StatusServiceUnavailable, "REQUEST_BODY_CAPACITY_EXHAUSTED")
	})
	t.Run("a body held by one request makes another wait", func(t *testing.T) {
		pr, pw := io.Pipe()
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- serveDirect(e.srv, "POST", "/v1/services", session, pr, -1) }()
		held := `{"name":"` + strings.Repeat("a", 12<<10)
		if _, err := pw.Write([]byte(held)); err != nil {
			t.Fatal(err)
		}
		// This write returns only once the handler has asked for more,
		// so the bytes above have been read and counted.
		if _, err := pw.Write([]byte("a")); err != nil {
			t.Fatal(err)
		}
		second := `{"name":"` + strings.Repeat("b", 8<<10) + `"}`
		rec := serveDirect(e.srv, "POST", "/v1/services", session, strings.NewReader(second), int64(len(second)))
		resp{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}.want(t, http.StatusServiceUnavailable, "REQUEST_BODY_CAPACITY_EXHAUSTED")
		pw.Write([]byte(`"}`))
		pw.Close()
		<-done
		rec = serveDirect(e.srv, "POST", "/v1/services", session, strings.NewReader(second), int64(len(second)))
		if rec.Code == http.StatusServiceUnavailable {
			t.Fatalf("still refused once the first request ended: %s", rec.Body)
		}
	})
	if used := e.srv.kit.Bodies.Used(); used != 0 {
		t.Fatalf("%d body bytes still counted after every request ended", used)
	}
}
