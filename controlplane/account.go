package controlplane

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/ownerauth"
)

// deleteAccount deletes everything namespace ns owns, for
// DELETE /v1/auth/account. Pending claims are rejected and approved ones
// revoked through the owner's transition path (with their events); the
// account's services are deleted as DELETE /v1/services/{id} would; then
// the namespace becomes a tombstone and its passkeys, challenges, sessions
// and gateways go. Claims are moved before the tombstone so a failure
// leaves a live session to retry with; approved claims are swept once more
// after it, because an approval racing the deletion may have committed in
// between.
func (s *Server) deleteAccount(ctx context.Context, ns string) (ownerauth.Deletion, error) {
	var d ownerauth.Deletion
	rejected, err := s.moveAll(ctx, ns, StatusPending, "reject")
	if err != nil {
		return d, err
	}
	revoked, err := s.moveAll(ctx, ns, StatusApproved, "revoke")
	if err != nil {
		return d, err
	}
	services, err := s.store.listServices(ctx, ns)
	if err != nil {
		return d, err
	}
	for _, svc := range services {
		rev, rej, err := s.store.deleteService(ctx, ns, svc.ID, s.now())
		if err != nil && !errors.Is(err, errServiceNotFound) {
			return d, err
		}
		for _, c := range rev {
			s.publish(ctx, EventRevoked, c)
		}
		for _, c := range rej {
			s.publish(ctx, EventRejected, c)
		}
	}
	now := s.now()
	var closeGateways func(context.Context)
	err = s.store.deactivateNamespace(ctx, ns, now, func(tx *sql.Tx) (err error) {
		closeGateways, err = s.gateways.UnpairNamespace(ctx, tx, ns)
		return err
	})
	if err != nil {
		return d, err
	}
	closeGateways(ctx)
	late, err := s.moveAll(context.WithoutCancel(ctx), ns, StatusApproved, "revoke")
	if err != nil {
		s.log.ErrorContext(ctx, "account deletion: revoking late approvals failed", "namespace", ns, "err", err)
	}
	s.log.InfoContext(ctx, "account deleted", "namespace", ns, "revoked", revoked+late, "rejected", rejected)
	return ownerauth.Deletion{At: now, Revoked: revoked + late, Rejected: rejected}, nil
}

// moveAll applies action to every claim of ns in status from, through the
// same transition and event path as the owner's claim routes. A claim
// that moved meanwhile (or is past its pending expiry) is skipped.
func (s *Server) moveAll(ctx context.Context, ns, from, action string) (int, error) {
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
		if errors.As(err, &te) || errors.Is(err, errClaimNotFound) {
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

// deactivateNamespace leaves the tombstone of an account deletion: the
// namespace row stays (so the name is never registered again and the DID
// resolves as deactivated) while its passkeys, challenges and sessions go.
// also runs in the same transaction, to delete what the other parts hold
// of ns (its gateways).
func (s *Store) deactivateNamespace(ctx context.Context, ns string, now time.Time, also func(*sql.Tx) error) error {
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE namespaces SET deactivated_at = $2, updated_at = $2
			WHERE namespace = $1 AND deactivated_at IS NULL`, ns, sqldb.Micros(now)); err != nil {
			return sqldb.Err("deactivate namespace", err)
		}
		for _, q := range []string{
			`DELETE FROM passkeys WHERE namespace = $1`,
			`DELETE FROM webauthn_challenges WHERE namespace = $1`,
			`DELETE FROM sessions WHERE namespace = $1`,
		} {
			if _, err := tx.ExecContext(ctx, q, ns); err != nil {
				return sqldb.Err("delete account data", err)
			}
		}
		return also(tx)
	})
}

// alertMail is the accounts' Mail hook: alert mail through the webhooks'
// alert settings, nil when alert mail is off.
func (s *Server) alertMail() func(ctx context.Context, to string, copies bool, subject, body string, logAttrs ...any) {
	a := s.cfg.Webhooks.Alert
	if !a.Enabled() {
		return nil
	}
	return func(ctx context.Context, to string, copies bool, subject, body string, logAttrs ...any) {
		a.Notify(ctx, s.log, s.now(), to, copies, subject, body, logAttrs...)
	}
}
