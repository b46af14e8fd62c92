package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestControlPlaneOutage runs a gateway (claims TTL 2 s, poll 1 s) against
// a real control plane that is down when the gateway starts, comes up, goes
// down again mid-run and comes back. The gateway fails closed whenever it
// holds no fresh claims (503 AUTH_CLAIMS_UNAVAILABLE with Retry-After, and
// /health/ready 503 until claims first load) and recovers by itself.
func TestControlPlaneOutage(t *testing.T) {
	t.Parallel() // mostly waiting on the claims clock
	w := newWorld(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.WriteString(rw, "ok")
	}))
	defer upstream.Close()
	const ttl = 2 * time.Second

	w.cp.stop() // down before the gateway starts
	gw := startGateway(t, w, nil, bearer("github", upstream.URL, "upstream-token"))
	client := &http.Client{Timeout: 10 * time.Second}
	signed := func() answer { return call(t, client, "GET", gw.url+"/proxy/github/repos", w.agent, nil) }
	ready := func() int { return call(t, client, "GET", gw.url+"/health/ready", nil, nil).status }
	failsClosed := func(phase string) {
		t.Helper()
		a := signed()
		a.want(t, http.StatusServiceUnavailable, "AUTH_CLAIMS_UNAVAILABLE")
		if a.header.Get("Retry-After") == "" {
			t.Fatalf("%s: 503 without Retry-After", phase)
		}
	}

	// Down at start: closed for longer than two poll intervals, not ready.
	closedFor := time.Now().Add(2500 * time.Millisecond)
	n := 0
	for ; time.Now().Before(closedFor); n++ {
		failsClosed("control plane down at start")
		if code := ready(); code != http.StatusServiceUnavailable {
			t.Fatalf("/health/ready = %d while claims never loaded, want 503", code)
		}
		time.Sleep(100 * time.Millisecond) // sampling a steady state; nothing to await
	}
	t.Logf("down at start: %d signed requests over 2.5 s, all 503 AUTH_CLAIMS_UNAVAILABLE; /health/ready 503", n)

	w.cp.start()
	took := eventually(t, 5*time.Second, "recovery after the control plane came up", func() bool { return signed().status == 200 })
	if code := ready(); code != http.StatusOK {
		t.Fatalf("/health/ready = %d after claims loaded", code)
	}
	t.Logf("control plane up: first 200 after %v; /health/ready 200", took.Round(time.Millisecond))

	// Down mid-run: the snapshot serves until it is TTL old, then the
	// gateway fails closed.
	w.cp.stop()
	stopped := time.Now()
	eventually(t, ttl+2*time.Second, "the gateway to fail closed after the claims TTL", func() bool {
		a := signed()
		if a.status == 200 {
			return false
		}
		a.want(t, http.StatusServiceUnavailable, "AUTH_CLAIMS_UNAVAILABLE")
		return true
	})
	closedAfter := time.Since(stopped)
	if closedAfter > ttl+time.Second { // the TTL runs from the last refresh before the outage; the rest is polling slack
		t.Fatalf("still serving %v after the control plane went down; TTL is %v", closedAfter, ttl)
	}
	for range 5 {
		failsClosed("control plane down mid-run")
	}

	w.cp.start()
	took = eventually(t, 5*time.Second, "recovery after the control plane came back", func() bool { return signed().status == 200 })
	t.Logf("down mid-run: fail-closed %v after the outage began (TTL %v); recovered %v after it ended",
		closedAfter.Round(time.Millisecond), ttl, took.Round(time.Millisecond))
}
