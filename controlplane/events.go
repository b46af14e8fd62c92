package controlplane

import (
	"context"
	"time"
)

// Claim lifecycle event types, as delivered to webhooks.
const (
	EventSubmitted = "request.submitted"
	EventApproved  = "request.approved"
	EventRejected  = "request.rejected"
	EventRevoked   = "request.revoked"
)

// Event is a claim lifecycle change, published after its transaction has
// committed.
type Event struct {
	Type  string // one of the Event* constants
	Claim Claim  // the claim as committed
	At    time.Time
}

// Events receives lifecycle events (webhook delivery, cache invalidation).
// Publish is called synchronously after the change has committed; an error
// is logged and does not undo the change, so an implementation that must not
// lose events should enqueue durably and return quickly.
type Events interface {
	Publish(ctx context.Context, e Event) error
}

func (s *Server) publish(ctx context.Context, typ string, c Claim) {
	if s.cfg.Events == nil {
		return
	}
	// The request may be ending; the event must still go out.
	ctx = context.WithoutCancel(ctx)
	if err := s.cfg.Events.Publish(ctx, Event{Type: typ, Claim: c, At: s.now()}); err != nil {
		s.log.ErrorContext(ctx, "publish event failed", "type", typ, "claim_id", c.ID, "err", err)
	}
}
