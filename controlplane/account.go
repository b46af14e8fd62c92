package controlplane

import (
	"context"
	"database/sql"
	"time"

	"github.com/idnhq/idn/controlplane/internal/ownerauth"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
)

// deleteAccount deletes everything namespace ns owns, for
// DELETE /v1/auth/account. Its claims and services go first
// (claims.Core.Retire); then the namespace becomes a tombstone and its passkeys, challenges, sessions
// and gateways go. Claims are moved before the tombstone so a failure
// leaves a live session to retry with; approved claims are swept once more
// after it, because an approval racing the deletion may have committed in
// between.
func (s *Server) deleteAccount(ctx context.Context, ns string) (ownerauth.Deletion, error) {
	var d ownerauth.Deletion
	revoked, rejected, err := s.claims.Retire(ctx, ns)
	if err != nil {
		return d, err
	}
	now := s.now()
	var closeGateways func(context.Context)
	err = s.store.deactivateNamespace(ctx, ns, now, func(tx *sql.Tx) (err error) {
		if closeGateways, err = s.gateways.UnpairNamespace(ctx, tx, ns); err != nil {
			return err
		}
		if err := s.actions.DeleteNamespace(ctx, tx, ns); err != nil {
			return err
		}
		return s.activity.DeleteNamespace(ctx, tx, ns)
	})
	if err != nil {
		return d, err
	}
	closeGateways(ctx)
	late, err := s.claims.RevokeApproved(context.WithoutCancel(ctx), ns)
	if err != nil {
		s.log.ErrorContext(ctx, "account deletion: revoking late approvals failed", "namespace", ns, "err", err)
	}
	s.log.InfoContext(ctx, "account deleted", "namespace", ns, "revoked", revoked+late, "rejected", rejected)
	return ownerauth.Deletion{At: now, Revoked: revoked + late, Rejected: rejected}, nil
}

// deactivateNamespace leaves the tombstone of an account deletion: the
// namespace row stays (so the name is never registered again and the DID
// resolves as deactivated) while its passkeys, challenges and sessions go.
// also runs in the same transaction, to delete what the other parts hold
// of ns (its gateways and their activity).
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
