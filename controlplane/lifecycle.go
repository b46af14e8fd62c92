package controlplane

import (
	"context"
	"sync"
	"time"

	"github.com/idnhq/idn/controlplane/claims"
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

// Start runs the background work in goroutines until ctx ends or Close is
// called: Maintain every minute, and the webhook and registry workers
// (RunWorkers). It returns at once; call it once.
func (s *Server) Start(ctx context.Context) {
	ctx, s.stop = context.WithCancel(ctx)
	s.running.Go(func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			if err := s.Maintain(ctx); err != nil && ctx.Err() == nil {
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
		if err := s.RunWorkers(ctx); err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "webhook and registry workers stopped", "err", err)
		}
	})
}

// Close stops the background work Start runs and waits for it, answers
// the feed requests waiting for changes at once, and closes every gateway
// socket this Server holds (an http.Server's Shutdown neither closes nor
// waits for WebSockets: call Close after it, or register it with
// RegisterOnShutdown, which also spares Shutdown the feed's waits). The
// Store stays open; its opener closes it.
func (s *Server) Close() error {
	s.claims.EndWaits() // first: Shutdown waits for them
	if s.stop != nil {
		s.stop()
	}
	s.running.Wait()
	s.gateways.Close()
	return nil
}

// lifecycle is the background work of Start.
type lifecycle struct {
	stop    context.CancelFunc
	running sync.WaitGroup
}
