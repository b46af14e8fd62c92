package gateway

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Up waits until the gateway is ready to serve: the checks /health/ready
// runs all pass (the store answers, the claims of every stored
// connection's service have loaded, the request path is not stuck). Call
// it after Start. It returns nil once they pass; an error saying what is
// not ready when ctx ends first or the background work stops (ctx of
// Start done, or Close); and an error at once when Start was not called.
// It polls nothing: every claims refresh, and the look at the stored
// connections that Start runs once a second and at each change of the
// vault, wakes it to check again.
func (g *Gateway) Up(ctx context.Context) error {
	g.mu.Lock()
	started, done := g.started, g.done
	g.mu.Unlock()
	if !started {
		return errors.New("gateway: Up called before Start")
	}
	for {
		// Taken before the checks run, so that a change made while they
		// run wakes the next wait.
		changed := g.readiness.wait()
		err := g.ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-changed:
		case <-done:
			return fmt.Errorf("gateway: stopped before it was ready: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("gateway: not ready: %w: %w", ctx.Err(), err)
		}
	}
}

// readyCheckTimeout bounds each readiness check Up runs, as
// proxy.Health bounds those of /health/ready.
const readyCheckTimeout = 2 * time.Second

// ready runs the readiness checks in name order and joins their failures.
func (g *Gateway) ready(ctx context.Context) error {
	names := make([]string, 0, len(g.readyChecks))
	for name := range g.readyChecks {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		cctx, cancel := context.WithTimeout(ctx, readyCheckTimeout)
		if err := g.readyChecks[name](cctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		cancel()
	}
	return errors.Join(errs...)
}

// signal wakes every waiter when what readiness depends on may have
// changed.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next notify.
func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}
