package controlplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idnhq/idn/controlplane/internal/claims"
)

// ServiceSpec is a service to provision; see Server.Provision.
type ServiceSpec = claims.ServiceSpec

// Provision creates namespace ns (and its account, without passkeys) when
// it is absent and, when svc.Slug is set, the service svc owned by ns
// with a fresh API key, which it returns; a service ns already owns gets
// another key. It sets an owner up without HTTP, as the quickstart does;
// Server.IssueSession and Server.SigninLink then sign the owner in.
func (s *Server) Provision(ctx context.Context, ns string, svc ServiceSpec) (apiKey string, err error) {
	return s.claims.Provision(ctx, ns, svc)
}

// SigninLink makes a one-time link that opens the dashboard page (a path
// such as /signin?next=/claims) as the owner of namespace ns, and returns
// its path and fragment, to append to the dashboard's origin, and its
// expiry. Its redemption needs Config.SigninLinks (or the test seed).
func (s *Server) SigninLink(ctx context.Context, ns, page string) (path string, expires time.Time, err error) {
	return s.pages.SigninLink(ctx, ns, page)
}

// ErrStarted is returned by Start on a Server that was already started.
var ErrStarted = errors.New("controlplane: already started")

// Start runs the background work in goroutines until ctx ends or Close is
// called: maintenance every minute (expired claims, nonces, sessions,
// pairings and challenges), and the webhook and registry workers. It
// returns at once; a second call returns ErrStarted.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return ErrStarted
	}
	s.started = true
	ctx, s.stop = context.WithCancel(ctx)
	s.running.Go(func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			if err := s.maintain(ctx); err != nil && ctx.Err() == nil {
				s.log.ErrorContext(ctx, "maintenance failed", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	s.running.Go(func() {
		if err := s.runWorkers(ctx); err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "webhook and registry workers stopped", "err", err)
		}
	})
	return nil
}

// Up waits until the Server is ready to serve, as GET /health/ready
// reports it: the database answers and its schema is the one this binary
// expects. When ctx ends first, it returns why the last check failed.
func (s *Server) Up(ctx context.Context) error {
	var last error // the reason of the last check that ctx did not cut short
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err := s.ready(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			return fmt.Errorf("controlplane: not ready: %w", last)
		case <-time.After(wait):
		}
	}
}

// Close stops the background work Start runs and waits for it. It
// answers the feed requests waiting for changes at once, and closes every
// gateway socket this Server holds. An http.Server's Shutdown neither
// closes nor waits for WebSockets: call Close after it, or register it
// with RegisterOnShutdown, which also spares Shutdown the feed's waits.
// The Store stays open; its opener closes it.
func (s *Server) Close() error {
	s.claims.EndWaits() // first: Shutdown waits for them
	s.mu.Lock()
	if s.stop != nil {
		s.stop()
	}
	s.mu.Unlock()
	s.running.Wait()
	s.gateways.Close()
	return nil
}

// lifecycle is the background work of Start.
type lifecycle struct {
	mu      sync.Mutex
	started bool
	stop    context.CancelFunc
	running sync.WaitGroup
}
