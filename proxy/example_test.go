package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/proxy"
	"github.com/idnhq/idn/replay"
)

// connectionMap is a proxy.Connections kept in memory, with credentials a
// program read from wherever it keeps them.
type connectionMap map[string]*credvault.Resolved

func (m connectionMap) Lookup(id string) (*credvault.Resolved, bool) { r, ok := m[id]; return r, ok }

// approvedClaims is a claimcache.Source held in memory.
type approvedClaims []claimcache.Claim

func (a approvedClaims) ApprovedClaims(_ context.Context, service, _ string, add func(claimcache.Claim) error) (string, error) {
	for _, c := range a {
		if c.Service == service {
			if err := add(c); err != nil {
				return "", err
			}
		}
	}
	return "", nil
}

// newClaims returns a cache that approves agent for service.
func newClaims(agent *identity.Identity, service string) *claimcache.Cache {
	cache, err := claimcache.New(claimcache.Config{
		Source: approvedClaims{{ID: "clm_1", Namespace: agent.Namespace, Service: service,
			PublicKey: agent.PublicKeyString(), ApprovedAt: time.Now()}},
		Services: []string{service},
	})
	if err != nil {
		panic(err)
	}
	// A gateway runs cache.Run in the background; one refresh will do here.
	if err := cache.Refresh(context.Background(), service); err != nil {
		panic(err)
	}
	return cache
}

// The runtime pipeline between an agent and an upstream: the agent signs,
// the handler checks signature, claim and nonce, and forwards with the
// connection's credential, which the agent never holds.
func ExampleNew() {
	agent, _ := identity.New("alice")
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer upstream-token" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "sunny")
	}))
	defer upstream.Close()

	weather, err := credvault.NewResolved(&credvault.Connection{ID: "weather", BaseURL: upstream.URL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "WEATHER_TOKEN"}, "upstream-token")
	if err != nil {
		panic(err)
	}
	nonces, _ := replay.New(replay.Config{})
	h, err := proxy.New(proxy.Config{
		Connections: connectionMap{"weather": weather},
		Claims:      newClaims(agent, "weather"),
		Nonces:      nonces,
	})
	if err != nil {
		panic(err)
	}
	gw := httptest.NewServer(h)
	defer gw.Close()

	signed := &http.Client{Transport: agent.Transport(nil, identity.SignOptions{})}
	for _, client := range []*http.Client{signed, http.DefaultClient} {
		resp, err := client.Get(gw.URL + "/proxy/weather/forecast")
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var refusal struct{ Code string }
		if json.Unmarshal(body, &refusal) == nil {
			body = []byte(refusal.Code)
		}
		fmt.Println(resp.StatusCode, string(body))
	}
	// Output:
	// 200 sunny
	// 403 AUTH_IDENTITY_INVALID
}

// Health serves /health, /health/live and /health/ready; readiness runs
// every check.
func ExampleHealth() {
	health := &proxy.Health{Version: "v1.2.3", Checks: map[string]func(context.Context) error{
		"store":  func(context.Context) error { return nil },
		"claims": func(context.Context) error { return errors.New("claims never loaded") },
	}}
	mux := http.NewServeMux()
	mux.Handle("/health", health)
	mux.Handle("/health/", health)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, path := range []string{"/health", "/health/ready"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(body))
	}
	// Output:
	// 200 {"status":"ok","version":"v1.2.3"}
	// 503 {"checks":{"claims":"claims never loaded","store":"ok"},"status":"not_ready"}
}

// wedged is a nonce checker that stopped answering, as a deadlocked store
// would.
type wedged struct{ entered, release chan struct{} }

func (w wedged) CheckNonce(context.Context, string, string, time.Time) error {
	w.entered <- struct{}{}
	<-w.release
	return nil
}

// Progress is the readiness check that sees a wedged request path, which
// liveness cannot: here a request stuck in the nonce check.
func ExampleHandler_Progress() {
	agent, _ := identity.New("alice")
	weather, _ := credvault.NewResolved(&credvault.Connection{ID: "weather", BaseURL: "http://127.0.0.1:1",
		AuthMode: credvault.AuthBearer, AuthSecretKey: "WEATHER_TOKEN"}, "upstream-token")
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	nonces := wedged{make(chan struct{}), make(chan struct{})}
	h, err := proxy.New(proxy.Config{
		Connections: connectionMap{"weather": weather},
		Claims:      newClaims(agent, "weather"),
		Nonces:      nonces,
		Clock:       func() time.Time { return time.Unix(0, clock.Load()) },
	})
	if err != nil {
		panic(err)
	}
	gw := httptest.NewServer(h)
	defer gw.Close()
	signed := &http.Client{Transport: agent.Transport(nil, identity.SignOptions{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := signed.Get(gw.URL + "/proxy/weather/forecast"); err == nil {
			resp.Body.Close()
		}
	}()
	<-nonces.entered
	fmt.Println(h.Progress(context.Background())) // a readiness probe
	clock.Add(int64(15 * time.Second))
	fmt.Println(h.Progress(context.Background())) // the next, 15 s later
	close(nonces.release)
	<-done
	// Output:
	// <nil>
	// proxy: request path stuck: stall: 1 still in the phase after 15s
}
