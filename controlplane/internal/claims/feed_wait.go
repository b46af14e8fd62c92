package claims

import (
	"context"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/wake"
	"net/url"
	"strconv"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/claimcache/feedwire"
	"github.com/idnhq/idn/controlplane/internal/web"
)

// Bounds of the feed's long poll (GET /v1/namespaces/claims?since=…&wait=…).
// A wait holds a goroutine and a client connection, never a database
// connection: the change log is read when the wait starts and again at
// each wake. Past MaxFeedWaitsPerService waits of one service on one
// instance, or MaxFeedWaits in all, a request is answered at once, as
// without wait, and the gateway polls: a service's share keeps one
// service (or a stolen key of it) from taking every wait.
const (
	MaxFeedWait            = 30 * time.Second
	MaxFeedWaitsPerService = 256
	MaxFeedWaits           = 4096
)

// waitParam reads ?wait=: whole seconds from 0 (no wait) to MaxFeedWait.
func waitParam(q url.Values) (time.Duration, *apierror.Error) {
	if !q.Has(feedwire.WaitQuery) {
		return 0, nil
	}
	n, err := strconv.Atoi(q.Get(feedwire.WaitQuery))
	if err != nil || n < 0 || time.Duration(n)*time.Second > MaxFeedWait {
		return 0, web.Validation("wait must be whole seconds from 0 to %d", int(MaxFeedWait/time.Second))
	}
	return time.Duration(n) * time.Second, nil
}

// waitChanges is feedChanges that, when no change follows since, waits up
// to wait for one to commit and reads the log again at each wake. It
// answers no change when the wait ends, when the waits end (Core.EndWaits)
// and at once when the instance holds as many waits as it allows.
func (s *Core) waitChanges(ctx context.Context, slug string, since int64, limit int, wait time.Duration) ([]feedChange, bool, error) {
	if wait <= 0 {
		return s.store.feedChanges(ctx, slug, since, limit)
	}
	// A LISTEN connection that cannot be had within the wait (the
	// database refuses it) leaves the request a plain read.
	sctx, cancel := context.WithTimeout(ctx, wait)
	fw, err := s.waits.Start(sctx, slug)
	cancel()
	if errors.Is(err, wake.ErrFull) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return s.store.feedChanges(ctx, slug, since, limit)
	}
	if err != nil {
		return nil, false, err
	}
	defer fw.End()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		changed := fw.Signal()
		changes, more, err := s.store.feedChanges(ctx, slug, since, limit)
		if err != nil || len(changes) > 0 {
			return changes, more, err
		}
		if s.waits.Blocked != nil {
			s.waits.Blocked(slug)
		}
		select {
		case <-changed:
			if s.waits.Ended() {
				return s.store.feedChanges(ctx, slug, since, limit)
			}
		case <-timer.C:
			return nil, false, nil
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}
