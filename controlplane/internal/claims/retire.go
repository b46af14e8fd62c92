package claims

import (
	"context"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/webhooks"
)

// Retire rejects the pending claims of namespace ns and revokes its
// approved ones, through the owner's transition path (with their events),
// and deletes its services as DELETE /v1/services/{id} would, for the
// deletion of its account.
func (s *Core) Retire(ctx context.Context, ns string) (revoked, rejected int, err error) {
	if rejected, err = s.moveAll(ctx, ns, StatusPending, "reject"); err != nil {
		return 0, 0, err
	}
	if revoked, err = s.moveAll(ctx, ns, StatusApproved, "revoke"); err != nil {
		return 0, 0, err
	}
	services, err := s.store.listServices(ctx, ns)
	if err != nil {
		return 0, 0, err
	}
	for _, svc := range services {
		rev, rej, err := s.store.deleteService(ctx, ns, svc.ID, s.kit.Now())
		if err != nil && !errors.Is(err, ErrServiceNotFound) {
			return 0, 0, err
		}
		for _, c := range rev {
			s.publish(ctx, webhooks.EventRevoked, c)
		}
		for _, c := range rej {
			s.publish(ctx, webhooks.EventRejected, c)
		}
	}
	return revoked, rejected, nil
}

// RevokeApproved revokes every approved claim of ns, as Retire does; the
// deletion of an account runs it once more after the tombstone, for an
// approval that raced it.
func (s *Core) RevokeApproved(ctx context.Context, ns string) (int, error) {
	return s.moveAll(ctx, ns, StatusApproved, "revoke")
}

// moveAll applies action to every claim of ns in status from, through the
// same transition and event path as the owner's claim routes. A claim
// that moved meanwhile (or is past its pending expiry) is skipped.
func (s *Core) moveAll(ctx context.Context, ns, from, action string) (int, error) {
	claims, err := s.store.namespaceClaims(ctx, ns, from == StatusApproved)
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, c := range claims {
		if c.Status != from {
			continue
		}
		now := s.kit.Now()
		c, err := s.store.transition(ctx, ns, c.ID, action, now.Add(-s.cfg.PendingExpiry), now)
		var te *transitionError
		if errors.As(err, &te) || errors.Is(err, ErrClaimNotFound) {
			continue
		}
		if err != nil {
			return moved, err
		}
		s.publish(ctx, actionEvents[action], c)
		moved++
	}
	return moved, nil
}
