// Command controlplane runs the idn control plane (package controlplane)
// as an HTTP server.
//
// Every setting of control-plane.md is read from the environment and
// validated at start; all problems are listed in one message and the exit
// status is 2. Storage is SQLite in IDN_DATA_DIR (ADAPTER_PROVIDER=sqlite,
// the default) or PostgreSQL at DATABASE_URL (ADAPTER_PROVIDER=postgres).
// The server listens on CONTROLPLANE_ADDR (default :8787), serves /health,
// runs the claim expiry and cleanup once a minute and the webhook and
// registry workers continuously, and shuts down gracefully on SIGINT or
// SIGTERM. The data directory is created 0700, and the database, its -wal
// and -shm files and the secrets generated for ENVIRONMENT=local are 0600.
// MAX_PENDING_AUTHORIZATIONS (default 20) counts pending claims per
// namespace and service, and MAX_PENDING_AUTHORIZATIONS_PER_AGENT (default
// 5) bounds how many of them one agent address (IPv4, or IPv6 /64) holds.
// CONTROLPLANE_MAX_INFLIGHT_BODY_BYTES (default 64 MiB) caps the request
// body bytes held at once; past it requests are answered 503 with
// Retry-After. Extra settings of this binary:
// CONTROLPLANE_TRUSTED_PROXY_CIDRS (proxies whose X-Forwarded-* headers
// count), CONTROLPLANE_PUBLIC_URL
// (base of DID service endpoints; required unless ENVIRONMENT=local, since
// otherwise they would follow each client's Host header), WEBAUTHN_RP_ID
// and WEBAUTHN_RP_NAME (relying party; default: the first WebAuthn
// origin's host, "idn"), and WEBHOOK_ALERT_EMAIL_TO,
// WEBHOOK_ALERT_SMTP_ADDR, WEBHOOK_ALERT_SMTP_USERNAME,
// WEBHOOK_ALERT_SMTP_PASSWORD (default MAILER_API_KEY) for failure alerts.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idnhq/idn/controlplane"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Getenv, os.Stderr)
	stop()
	os.Exit(code)
}

// run starts the control plane and blocks until ctx ends; it returns the
// exit status.
func run(ctx context.Context, getenv func(string) string, stderr io.Writer) int {
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	s, err := loadSettings(getenv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		fmt.Fprintf(stderr, "controlplane: listen on %s: %v\n", s.addr, err)
		return 1
	}
	if err := serve(ctx, s, ln, log); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// serve opens the store, serves the API on ln and runs maintenance until
// ctx ends, then drains in-flight requests (up to 15 s).
func serve(ctx context.Context, s settings, ln net.Listener, log *slog.Logger) error {
	store, err := controlplane.Open(ctx, s.store)
	if err != nil {
		ln.Close()
		return err
	}
	defer store.Close()
	cfg := s.server
	cfg.Store, cfg.Logger = store, log
	api, err := controlplane.New(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	maintained := make(chan struct{})
	go func() {
		defer close(maintained)
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			if err := api.Maintain(ctx); err != nil && ctx.Err() == nil {
				log.Error("maintenance failed", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	workers := make(chan struct{})
	go func() {
		defer close(workers)
		if err := api.RunWorkers(ctx); err != nil && ctx.Err() == nil {
			log.Error("webhook and registry workers stopped", "err", err)
		}
	}()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			log.Warn("shutdown incomplete", "err", err)
		}
	}()
	log.Info("control plane listening", "addr", ln.Addr().String(), "environment", s.environment, "storage", s.store.Provider)
	err = srv.Serve(ln)
	cancel()
	<-drained // Serve returns as shutdown starts; in-flight requests still use the store
	<-maintained
	<-workers
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
