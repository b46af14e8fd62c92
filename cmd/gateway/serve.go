package main

import (
	"context"
	"fmt"
	"github.com/idnhq/idn/gateway/gctune"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/idnhq/idn/credvault/pgstore"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/kit/buildinfo"
	"github.com/idnhq/idn/kit/envconf"
	"github.com/idnhq/idn/replay/redisstore"
	"github.com/redis/go-redis/v9"
)

func init() {
	register(&command{name: "serve", summary: "run the gateway (the default command)", run: runServe, vars: serveVars})
	defaultCommand = "serve"
}

// runServe reads every GATEWAY_* and IDN_* setting, validates them all, and
// serves until SIGINT or SIGTERM, then drains: not ready at once, serving
// for GATEWAY_SHUTDOWN_DELAY_SECONDS, then in-flight requests finish
// within GATEWAY_SHUTDOWN_TIMEOUT_SECONDS. Once the gateway is paired (gateway
// pair), it also keeps the link to the owner's dashboard (keepLink).
func runServe(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet("serve")
	if err := parseFlags(env, fs, "[--master-key KEY] (configured by the variables below)", args); err != nil {
		return err
	}
	r := envconf.New(env.getenv)
	s := readServe(r, env.getenv, env.environ, flagString(fs, "master-key"))
	if err := r.Err(); err != nil {
		return err
	}
	logger := s.log.Logger(env.stderr)
	s.gateway.Logger = logger
	tp, stopTracing, err := s.tracing.Provider(ctx, buildinfo.Version(), logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	s.gateway.TracerProvider = tp
	gcPercent := tuneGC(s.gogc)
	memoryLimit := tuneMemory(s.memoryLimit, s.gomemlimit)
	if s.databaseURL != "" {
		st, err := pgstore.Open(ctx, pgstore.Config{URL: s.databaseURL})
		if err != nil {
			return err
		}
		defer st.Close()
		// The held calls and approvals live beside the connections, so an
		// approval counts on every replica.
		s.gateway.Store, s.gateway.Holds = st, st.Holds()
	}
	if s.redisURL != "" {
		redis.SetLogger(redisLog{logger}) // its own lines would break the JSON log
		nonces, err := redisstore.New(ctx, redisstore.Config{URL: s.redisURL, Window: s.gateway.Proxy.MaxAge + s.gateway.Proxy.FutureSkew})
		if err != nil {
			return fmt.Errorf("GATEWAY_REDIS_URL: %w", err)
		}
		defer nonces.Close()
		s.gateway.NonceStore = nonces
	}
	gw, err := gateway.New(s.gateway)
	if err != nil {
		return err
	}
	defer gw.Close()
	if s.gogc == "" {
		defer gctune.Tune(gcPercent, gw.HeldBytes)()
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.addr, err)
	}
	if !onLoopback(ln.Addr()) {
		logger.Warn("gateway listens beyond loopback: anyone who can reach this address can call the runtime routes",
			"addr", ln.Addr().String())
	}
	tokenFrom := "GATEWAY_ADMIN_TOKEN"
	if s.gateway.Admin.Token == "" {
		tokenFrom = filepath.Join(s.gateway.DataDir, gateway.AdminTokenFile) + " (gateway admin-token prints it)"
	}
	logger.Info("gateway listening", "addr", ln.Addr().String(), "data_dir", s.gateway.DataDir, "admin_token", tokenFrom,
		"registry", s.gateway.ControlPlaneURL, "admin_access", string(s.gateway.Admin.Mode), "gateway_did", gw.Identity().DID(),
		"gogc", gcPercent, "memory_limit_bytes", memoryLimit)
	if err := gw.Start(context.Background()); err != nil {
		return err
	}
	// A paired gateway keeps its link to the owner's dashboard as well.
	linkCtx, stopLink := context.WithCancel(ctx)
	var link sync.WaitGroup
	link.Go(func() { keepLink(linkCtx, gw, s.gateway, logger) })
	defer link.Wait()
	defer stopLink()
	return serve(ctx, gw, ln, s.shutdownDelay, s.shutdownTimeout, logger)
}

// redisLog writes go-redis's messages (reconnections, failovers) to the
// gateway's log.
type redisLog struct{ logger *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.logger.InfoContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}

func onLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// serve serves gw on ln until ctx is done, then drains. Readiness fails
// at once, and the server goes on taking requests for delay, so that a
// load balancer polling readiness stops sending. Then it takes no new
// connection and gives those in flight timeout to finish. The drain is
// recorded in the metrics; serve returns nil after a clean one.
func serve(ctx context.Context, gw *gateway.Gateway, ln net.Listener, delay, timeout time.Duration, logger *slog.Logger) error {
	srv := gateway.NewServer(gw)
	srv.ErrorLog = slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
	srv.RegisterOnShutdown(gw.EndStreams)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// From here each answer closes its connection (see Gateway.ServeHTTP).
	// Turning keep-alives off on the server instead would close idle
	// connections at once, racing a request the load balancer is sending
	// on one: the request is verified, then its answer lost.
	gw.Drain()
	logger.Info("gateway draining: not ready", "delay_seconds", delay.Seconds(), "timeout_seconds", timeout.Seconds())
	select {
	case err := <-errc:
		return err
	case <-time.After(delay):
	}
	start := time.Now()
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	outcome := "success"
	if err != nil {
		outcome = "timeout"
		_ = srv.Close()
	}
	gw.Metrics().ObserveDrain(outcome, time.Since(start))
	logger.Info("gateway stopped", "drain", outcome, "seconds", time.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("shutdown: in-flight requests did not finish within %s", timeout)
	}
	return nil
}
