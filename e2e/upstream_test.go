package e2e

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
)

// closingUpstream accepts connections, reads the request head and closes:
// with rst, by an RST (SO_LINGER 0); otherwise by a FIN before any answer.
func closingUpstream(t *testing.T, rst bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = http.ReadRequest(bufio.NewReader(c))
				if rst {
					_ = c.(*net.TCPConn).SetLinger(0)
				}
				c.Close()
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// querySecret is a connection whose secret travels in the upstream URL, the
// case where an echoed transport error would leak it.
func querySecret(id, baseURL, secret string) conn {
	return conn{c: credvault.Connection{ID: id, Service: "github", BaseURL: baseURL, AuthMode: credvault.AuthQueryParam,
		AuthQueryParam: "api_key", AuthSecretKey: "key"}, secrets: map[string]string{"key": secret}}
}

// TestUpstreamFaults sends signed, approved requests to upstreams that are
// down, too slow, or drop the connection: each answer is the 502/504
// envelope with neither the upstream address nor the secret in it, and a
// healthy connection keeps working during and after the faults.
func TestUpstreamFaults(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const secret = "sk-upstream-secret-4f1c"

	healthy := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.WriteString(rw, "ok "+r.Header.Get("Authorization"))
	}))
	defer healthy.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // lets the server notice the gateway hanging up
		<-r.Context().Done()               // answers only after the gateway gives up
	}))
	defer slow.Close()
	hijack := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		c, _, err := rw.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	defer hijack.Close()
	down := "http://" + freeAddr(t) // nothing listens: connection refused
	eof, rst := closingUpstream(t, false), closingUpstream(t, true)

	gw := startGateway(t, w, func(c *gateway.Config) { c.Proxy.Timeout = time.Second },
		bearer("healthy", healthy.URL, secret),
		querySecret("down", down, secret), querySecret("slow", slow.URL, secret),
		querySecret("eof", eof, secret), querySecret("rst", rst, secret), querySecret("hijack", hijack.URL, secret))
	client := &http.Client{Timeout: 10 * time.Second}
	ready, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := gw.gw.Up(ready); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		conn, upstream string
		status         int
		code           string
	}{
		{"down", down, 502, "UPSTREAM_ERROR"},
		{"slow", slow.URL, 504, "UPSTREAM_TIMEOUT"},
		{"eof", eof, 502, "UPSTREAM_ERROR"},
		{"rst", rst, 502, "UPSTREAM_ERROR"},
		{"hijack", hijack.URL, 502, "UPSTREAM_ERROR"},
	}
	const perCase = 10
	var mu sync.Mutex
	healthyOK := 0
	var wg sync.WaitGroup
	for _, tc := range cases {
		for range perCase {
			wg.Go(func() {
				start := time.Now()
				a, err := try(client, "POST", gw.url+"/proxy/"+tc.conn+"/v1/items?page=2", w.agent, []byte(`{"a":1}`))
				elapsed := time.Since(start)
				if err != nil {
					t.Errorf("%s: %v", tc.conn, err)
					return
				}
				e, err := a.envelope()
				if err != nil || a.status != tc.status || e.Code != tc.code {
					t.Errorf("%s: got %d %s (%v), want %d %s", tc.conn, a.status, a.body, err, tc.status, tc.code)
				}
				host := strings.TrimPrefix(tc.upstream, "http://")
				for _, leak := range []string{secret, host, "api_key", "127.0.0.1"} {
					if strings.Contains(string(a.body), leak) || strings.Contains(headerText(a.header), leak) {
						t.Errorf("%s: answer leaks %q: %s %v", tc.conn, leak, a.body, a.header)
					}
				}
				if tc.code == "UPSTREAM_TIMEOUT" && (elapsed < time.Second || elapsed > 3*time.Second) {
					t.Errorf("slow upstream answered after %v; the proxy timeout is 1 s", elapsed)
				}
				if a, err := try(client, "GET", gw.url+"/proxy/healthy/x", w.agent, nil); err == nil && a.status == 200 {
					mu.Lock()
					healthyOK++
					mu.Unlock()
				} else {
					t.Errorf("healthy connection during faults: %d %s %v", a.status, a.body, err)
				}
			})
		}
	}
	wg.Wait()
	a := call(t, client, "GET", gw.url+"/proxy/healthy/after", w.agent, nil)
	// The upstream echoes the credential it received; the agent sees it
	// redacted.
	if a.status != 200 || string(a.body) != "ok [redacted]" {
		t.Fatalf("healthy connection after the faults: %d %s", a.status, a.body)
	}
	t.Logf("%d faulty requests (%d per kind) answered with their envelope; %d interleaved healthy requests all 200",
		len(cases)*perCase, perCase, healthyOK)
}

func headerText(h http.Header) string {
	var b strings.Builder
	_ = h.Write(&b)
	return b.String()
}
