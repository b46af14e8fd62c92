// Command custom builds a gateway from the library's parts instead of
// package gateway:
//
//   - proxy.Handler for the signed pipeline;
//   - claimcache for the approved claims (polled from the control plane)
//     and for filing claims for agents it does not know yet;
//   - replay for the nonces;
//   - its own proxy.Connections, whose credentials come from environment
//     variables rather than an encrypted vault.
//
// Run it beside a control plane:
//
//	IDN_REGISTRY_URL=http://127.0.0.1:8787 IDN_SERVICE_API_KEY=idn_sk_… \
//	WEATHER_URL=https://api.weather.example WEATHER_TOKEN=… go run ./examples/custom
//
// Agents then call http://127.0.0.1:38200/proxy/weather/… with signed
// requests (idn curl), and the control plane's owner of service "weather"
// approves them.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/proxy"
	"github.com/idnhq/idn/replay"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	h, err := newHandler(ctx, os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Addr: "127.0.0.1:38200", Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); srv.Close() }()
	log.Printf("custom gateway on http://%s/proxy/weather/", srv.Addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// envConnections is a proxy.Connections fixed at start, each connection's
// credential read from the environment variable its AuthSecretKey names.
type envConnections map[string]*credvault.Resolved

var _ proxy.Connections = envConnections(nil)

func (e envConnections) Lookup(id string) (*credvault.Resolved, bool) { r, ok := e[id]; return r, ok }

// loadConnections resolves every connection's credential through getenv.
func loadConnections(getenv func(string) string, conns ...*credvault.Connection) (envConnections, error) {
	out := envConnections{}
	for _, c := range conns {
		if getenv(c.AuthSecretKey) == "" {
			return nil, fmt.Errorf("connection %s: set %s to its upstream credential", c.ID, c.AuthSecretKey)
		}
		r, err := credvault.NewResolved(c, getenv(c.AuthSecretKey))
		if err != nil {
			return nil, fmt.Errorf("connection %s: %w", c.ID, err)
		}
		out[c.ID] = r
	}
	return out, nil
}

// newHandler wires the parts. Background work (the claims poll) runs until
// ctx is done.
func newHandler(ctx context.Context, getenv func(string) string) (http.Handler, error) {
	registry, apiKey := getenv("IDN_REGISTRY_URL"), getenv("IDN_SERVICE_API_KEY")
	if registry == "" || apiKey == "" {
		return nil, errors.New("set IDN_REGISTRY_URL and IDN_SERVICE_API_KEY (the control plane and the service's API key)")
	}
	conns, err := loadConnections(getenv, &credvault.Connection{ID: "weather", Service: "weather",
		BaseURL: getenv("WEATHER_URL"), AuthMode: credvault.AuthBearer, AuthSecretKey: "WEATHER_TOKEN"})
	if err != nil {
		return nil, err
	}

	// The control plane takes signed calls: this gateway signs with an
	// identity of its own (a fresh one each start will do).
	self, err := identity.New("custom-gateway")
	if err != nil {
		return nil, err
	}
	control := &http.Client{Timeout: 15 * time.Second, Transport: self.Transport(nil, identity.SignOptions{})}
	key := func(string) (string, error) { return apiKey, nil }

	claims, err := claimcache.New(claimcache.Config{
		Source:   &claimcache.HTTPSource{BaseURL: registry, Client: control, APIKey: key},
		Services: []string{"weather"},
	})
	if err != nil {
		return nil, err
	}
	if err := claims.Refresh(ctx, "weather"); err != nil {
		log.Printf("first claims refresh failed (agents get 503 until one succeeds): %v", err)
	}
	go claims.Run(ctx)
	submitter, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{BaseURL: registry, Client: control, APIKey: key})
	if err != nil {
		return nil, err
	}
	nonces, err := replay.New(replay.Config{})
	if err != nil {
		return nil, err
	}
	return proxy.New(proxy.Config{Connections: conns, Claims: claims, Submitter: submitter, Nonces: nonces, Logger: slog.Default()})
}
