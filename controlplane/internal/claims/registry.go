package claims

import (
	"context"
	"database/sql"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/registrywriter"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"time"
)

// registryView is c as the registry writer sees it.
func (c Claim) registryView() registrywriter.Claim {
	return registrywriter.Claim{ID: c.ID, Namespace: c.Namespace, PublicKey: c.PublicKey, Service: c.Service,
		Status: c.Status, ApprovalTxHash: c.ApprovalTxHash, RevocationTxHash: c.RevocationTxHash}
}

// applyClaimAction applies an owner's action to claim id of ns; approving
// a revoked or rejected claim approves its tuple under a new claim
// (reapprove).
// In sync mode an
// approval or revocation is written to the registry first, and the claim
// moves only once the write is mined, carrying its hash; a failed write
// leaves the claim as it was.
func (s *Core) applyClaimAction(ctx context.Context, ns, id, action string, now time.Time) (Claim, error) {
	cutoff := now.Add(-s.cfg.PendingExpiry)
	r := s.registry
	if r == nil || !r.Sync() || action == "reject" {
		c, err := s.store.transition(ctx, ns, id, action, cutoff, now)
		if te, ok := errors.AsType[*transitionError](err); ok && action == "approve" && final(te.From) {
			return s.store.reapprove(ctx, ns, id, now)
		}
		return c, err
	}
	c, err := s.store.claimByID(ctx, id)
	if err == nil && c.Namespace != ns {
		err = ErrClaimNotFound
	}
	if err != nil {
		return Claim{}, err
	}
	move := func() (Claim, error) { return s.store.transition(ctx, ns, id, action, cutoff, now) }
	if t, ok := transitions[action]; action == "approve" && final(c.Status) {
		move = func() (Claim, error) { return s.store.reapprove(ctx, ns, id, now) }
	} else if !ok || c.Status != t.from {
		return Claim{}, &transitionError{Action: action, From: c.Status}
	}
	if c.Status == StatusPending && !c.CreatedAt.After(cutoff) {
		return Claim{}, &transitionError{Action: action, From: StatusExpired}
	}
	var hash string
	if action == "approve" || c.ApprovalTxHash != "" { // a revocation needs a recorded approval
		if hash, err = r.Write(ctx, c.registryView(), action); err != nil {
			s.kit.Log.WarnContext(ctx, "registry write failed; the claim is unchanged", "claim_id", id, "op", action, "err", err)
			return Claim{}, &registryWriteError{Err: err}
		}
	}
	moved, err := move()
	if err != nil {
		if action == "approve" {
			r.Withdraw(ctx, c.registryView())
		}
		return moved, err
	}
	if hash != "" {
		// The write is mined: record it even if the request is ending. A
		// crash before this line leaves the hash to the writer's RunDue, which finds
		// the write on chain.
		if err := r.Record(context.WithoutCancel(ctx), moved.ID, action, hash); err != nil {
			return moved, err
		}
		if action == "approve" {
			moved.ApprovalTxHash = hash
		} else {
			moved.RevocationTxHash = hash
		}
	}
	return moved, nil
}

// claimByID returns a claim by id, whoever owns it.
func (s *Store) claimByID(ctx context.Context, id string) (Claim, error) {
	c, err := scanClaim(s.db.QueryRowContext(ctx, `SELECT `+claimColumns+` FROM claims WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return c, ErrClaimNotFound
	}
	return c, sqldb.Err("claim", err)
}
