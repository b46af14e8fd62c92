package controlplane

import (
	"context"
	"time"

	"github.com/idnhq/idn/controlplane/internal/webhooks"
)

// Claim lifecycle event names of webhooks (webhooks.ClaimSubmitted, …).
const (
	ClaimSubmitted = webhooks.ClaimSubmitted
	ClaimApproved  = webhooks.ClaimApproved
	ClaimRejected  = webhooks.ClaimRejected
	ClaimRevoked   = webhooks.ClaimRevoked
)

// Claim lifecycle event types of Event, and the request.* aliases of the
// webhook event names (a webhook subscribed by them gets events under
// them).
const (
	EventSubmitted = webhooks.EventSubmitted
	EventApproved  = webhooks.EventApproved
	EventRejected  = webhooks.EventRejected
	EventRevoked   = webhooks.EventRevoked
)

// Event is a claim lifecycle change, published after its transaction has
// committed.
type Event struct {
	Type  string // one of the Event* constants
	Claim Claim  // the claim as committed
	At    time.Time
}

// Events receives lifecycle events in process (cache invalidation,
// metrics). Publish is called synchronously after the change has
// committed; an error is logged and does not undo the change. A crash
// between the commit and Publish loses the call: webhook deliveries do not
// depend on it, since their outbox rows are written by the database in the
// claim change's own transaction (see migrate_webhooks.go), and registry
// writes in queue mode are found from the claims themselves.
type Events interface {
	Publish(ctx context.Context, e Event) error
}

// publish runs the composition's follow-ups of a committed claim change
// (the claims part has queued its registry write): a nudge to RunWorkers
// for the webhook
// deliveries the change queued, and Config.Events.
func (s *Server) publish(ctx context.Context, typ string, c Claim) {
	// The request may be ending; the follow-ups must still happen.
	ctx = context.WithoutCancel(ctx)
	s.hooks.Wake()
	if s.cfg.Events == nil {
		return
	}
	if err := s.cfg.Events.Publish(ctx, Event{Type: typ, Claim: c, At: s.now()}); err != nil {
		s.log.ErrorContext(ctx, "publish event failed", "type", typ, "claim_id", c.ID, "err", err)
	}
}
