package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/gateway"
)

// slowClient opens a connection and sends a request head one byte at a
// time, every interval, never finishing it. It returns when the server
// closes the connection or limit passes, and reports how long the
// connection lived and whether the server cut it.
func slowClient(addr string, interval, limit time.Duration) (lived time.Duration, cut bool, err error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, false, err
	}
	defer c.Close()
	start := time.Now()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = io.Copy(io.Discard, c) // returns when the server closes
	}()
	head := "GET /proxy/github/slow HTTP/1.1\r\nHost: " + addr + "\r\n" + strings.Repeat("X-Slow: dribble\r\n", 1000)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for i := 0; ; i++ {
		select {
		case <-closed:
			return time.Since(start), true, nil
		case <-deadline.C:
			return time.Since(start), false, nil
		case <-tick.C:
			if _, err := c.Write([]byte{head[i%len(head)]}); err != nil {
				<-closed
				return time.Since(start), true, nil
			}
		}
	}
}

// TestServerTimeouts checks the values gateway.NewServer sets, and that
// the server built with it, as cmd/gateway serves the gateway, cuts a client that
// dribbles its headers after ReadHeaderTimeout (10 s; this test runs in
// parallel with the others to hide the wait).
func TestServerTimeouts(t *testing.T) {
	t.Parallel()
	srv := gateway.NewServer(http.NotFoundHandler())
	if srv.ReadHeaderTimeout != 10*time.Second || srv.ReadTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 {
		t.Fatalf("NewServer timeouts: header %v, read %v, idle %v, max header bytes %d",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
	w := newWorld(t)
	gw := startGateway(t, w, nil)
	lived, cut, err := slowClient(strings.TrimPrefix(gw.url, "http://"), 100*time.Millisecond, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !cut || lived < srv.ReadHeaderTimeout-time.Second || lived > srv.ReadHeaderTimeout+2*time.Second {
		t.Fatalf("slow client cut=%v after %v; want cut after about %v", cut, lived, srv.ReadHeaderTimeout)
	}
	t.Logf("gateway's own server cut a header-dribbling client after %v (ReadHeaderTimeout %v)", lived.Round(time.Millisecond), srv.ReadHeaderTimeout)
}

// TestSlowloris opens 200 connections that dribble request headers one
// byte per 100 ms at a gateway served by gateway.NewServer with
// ReadHeaderTimeout shortened to 2 s (the only change; TestServerTimeouts
// covers the real 10 s). While they are open a well-behaved agent still
// gets every answer at once, and the server cuts every slow connection
// within the timeout.
func TestSlowloris(t *testing.T) {
	t.Parallel()
	const (
		slow          = 200
		headerTimeout = 2 * time.Second
	)
	w := newWorld(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, "ok") }))
	defer upstream.Close()
	gw := startGateway(t, w, nil, bearer("github", upstream.URL, "upstream-token"))

	srv := gateway.NewServer(gw.gw)
	srv.ReadHeaderTimeout = headerTimeout
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	defer func() { srv.Close(); <-served }()
	addr := ln.Addr().String()
	client := &http.Client{Timeout: 5 * time.Second}
	ready, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := gw.gw.Up(ready); err != nil {
		t.Fatal(err)
	}

	type result struct {
		lived time.Duration
		cut   bool
		err   error
	}
	results := make(chan result, slow)
	var opened sync.WaitGroup
	opened.Add(slow)
	start := time.Now()
	for range slow {
		go func() {
			opened.Done()
			lived, cut, err := slowClient(addr, 100*time.Millisecond, 5*time.Second)
			results <- result{lived, cut, err}
		}()
	}
	opened.Wait()

	// A well-behaved agent while the slow connections are open.
	var latencies, answered []time.Duration
	for range 20 {
		t0 := time.Now()
		if a := call(t, client, "GET", "http://"+addr+"/proxy/github/x", w.agent, nil); a.status != 200 {
			t.Fatalf("well-behaved agent during slowloris: %d %s", a.status, a.body)
		}
		latencies = append(latencies, time.Since(t0))
		answered = append(answered, time.Since(start))
	}
	goodDone := time.Since(start)

	var lived []time.Duration
	for range slow {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		if !r.cut {
			t.Fatalf("a slow connection was still open after %v", r.lived)
		}
		lived = append(lived, r.lived)
	}
	sort.Slice(lived, func(i, j int) bool { return lived[i] < lived[j] })
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	// On a loaded machine the 20 may outlast the flood; the first five
	// must be answered while every slow connection is still open.
	if answered[4] >= lived[0] {
		t.Fatalf("the fifth well-behaved request was answered at %v, after the first slow connection was cut (%v): they did not overlap", answered[4], lived[0])
	}
	if lived[len(lived)-1] > headerTimeout+time.Second {
		t.Fatalf("slowest cut after %v; ReadHeaderTimeout is %v", lived[len(lived)-1], headerTimeout)
	}
	t.Logf("%d slow connections open: 20 signed requests all 200 (latency median %v, max %v, done %v after the flood began); "+
		"slow connections cut after %v to %v (ReadHeaderTimeout %v)", slow, latencies[len(latencies)/2].Round(time.Microsecond),
		latencies[len(latencies)-1].Round(time.Microsecond), goodDone.Round(time.Millisecond),
		lived[0].Round(time.Millisecond), lived[len(lived)-1].Round(time.Millisecond), headerTimeout)
}
