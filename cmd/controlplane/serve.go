package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/kit/buildinfo"
	"github.com/idnhq/idn/kit/envconf"
	"github.com/idnhq/idn/registry/evm"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

func init() {
	register(&command{
		name:    "serve",
		summary: "run the control plane's HTTP server",
		vars:    serveVars,
		setup: func(*flag.FlagSet) func(context.Context, *cliEnv, []string) error {
			return runServe
		},
	})
}

// runServe reads the settings and serves until ctx ends.
func runServe(ctx context.Context, env *cliEnv, _ []string) error {
	r := envconf.New(env.getenv)
	s := readSettings(r, env.getenv)
	if err := r.Err(); err != nil {
		return err
	}
	log := s.log.Logger(env.stderr)
	tp, stopTracing, err := s.tracing.Provider(ctx, buildinfo.Version(), log)
	if err != nil {
		return err
	}
	defer stopTracing()
	s.store.TracerProvider, s.server.TracerProvider = tp, tp
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.addr, err)
	}
	if !onLoopback(ln.Addr()) {
		log.Warn("control plane listens beyond loopback: anyone who can reach this address can call the API",
			"addr", ln.Addr().String())
	}
	return serve(ctx, s, ln, log)
}

// warnOrigins warns when the origins a browser must come from are not
// where the control plane listens: sign-up would fail with ORIGIN_FORBIDDEN
// after the authenticator made a passkey. A trusted proxy may map ports,
// so none is assumed then.
func warnOrigins(s settings, a net.Addr, log *slog.Logger) {
	if len(s.server.TrustedProxies) > 0 {
		return
	}
	for _, o := range []struct {
		name    string
		origins []string
	}{{"ALLOWED_ORIGINS", s.server.AllowedOrigins}, {"WEBAUTHN_ALLOWED_ORIGINS", s.server.Auth.Origins}} {
		if missesPort(o.origins, a) {
			log.Warn("no origin of "+o.name+" is on the port the control plane listens on: the dashboard's sign-up and log-in "+
				"will be refused (ORIGIN_FORBIDDEN); set "+o.name+" to the address the browser opens",
				"addr", a.String(), "variable", o.name, "origins", strings.Join(o.origins, ","))
		}
	}
}

// missesPort reports whether origins are all on this machine (localhost
// or a loopback address) and none of them on a's port: a browser that
// opens the control plane where it listens is then refused. Origins
// elsewhere say a proxy stands in front, where the ports differ.
func missesPort(origins []string, a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || len(origins) == 0 {
		return false
	}
	for _, o := range origins {
		u, err := url.Parse(o)
		if err != nil {
			return false
		}
		host := u.Hostname()
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return false
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if port == strconv.Itoa(tcp.Port) {
			return false
		}
	}
	return true
}

func onLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// serve opens the store, serves the API on ln and runs maintenance until
// ctx ends, then drains in-flight requests for up to s.shutdownTimeout.
func serve(ctx context.Context, s settings, ln net.Listener, log *slog.Logger) error {
	store, err := controlplane.Open(ctx, s.store)
	if err != nil {
		ln.Close()
		if ctx.Err() != nil {
			return nil // stopped while starting: nothing to drain
		}
		return err
	}
	defer store.Close()
	cfg := s.server
	cfg.Store, cfg.Logger = store, log
	cfg.AccessLog = log.With("log", "access")
	cfg.Metrics = prometheus.NewRegistry()
	cfg.Metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if cfg.Registry.Mode != controlplane.RegistryDisabled {
		chain := s.chain.evm
		chain.Logger = log
		backend, err := evm.New(ctx, chain) // refuses an endpoint on another chain
		if err != nil {
			ln.Close()
			return err
		}
		defer backend.Close()
		cfg.Registry.Backend = backend
		cfg.Registry.ExplorerURL = s.chain.explorer
		cfg.Metrics.MustRegister(backend.Collectors()...)
	}
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
	srv.RegisterOnShutdown(func() { api.Close() }) // Shutdown neither closes nor waits for WebSockets
	if cfg.Registry.Mode == controlplane.RegistrySync {
		// An owner's approval waits for its write's receipt (up to 60 s)
		// before it answers.
		srv.WriteTimeout = 2 * time.Minute
	}
	if err := api.Start(ctx); err != nil {
		return err
	}
	defer api.Close() // after the drain: in-flight requests still used the store
	served := make(chan error, 1)
	log.Info("control plane listening", "addr", ln.Addr().String(), "environment", s.environment, "storage", s.store.Provider)
	warnOrigins(s, ln.Addr(), log)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	err = drain(srv, s.shutdownTimeout, log)
	<-served
	return err
}

// drain stops accepting connections and waits up to timeout for in-flight
// requests, then closes what is left; it logs how the drain ended.
func drain(srv *http.Server, timeout time.Duration, log *slog.Logger) error {
	start := time.Now()
	log.Info("control plane shutting down", "timeout_seconds", timeout.Seconds())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := srv.Shutdown(ctx)
	elapsed := time.Since(start)
	if errors.Is(err, context.DeadlineExceeded) {
		srv.Close()
		log.Warn("control plane stopped: in-flight requests did not finish in time and were cut", "drain", "timeout", "seconds", elapsed.Seconds())
		return fmt.Errorf("shutdown: in-flight requests did not finish within %s", timeout)
	}
	if err != nil {
		return err
	}
	log.Info("control plane stopped", "drain", "success", "seconds", elapsed.Seconds())
	return nil
}
