package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idnhq/idn/approval"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Holds keeps an approval.Gate's holds in the fleet's database, so that an
// approval granted through any replica lets exactly its uses through on
// all of them, and survives their restarts. A use is one conditional
// UPDATE, which PostgreSQL runs under the row's lock and commits durably
// before the call goes on. It is safe for concurrent use.
//
// PostgreSQL rather than Redis: a Redis restarted from a snapshot, or
// failed over to a replica that lags, can bring back a use already taken.
// An approval would then release more calls than the owner granted.
type Holds struct{ pool *pgxpool.Pool }

var _ approval.Store = (*Holds)(nil)

// Holds returns the holds kept in s's database, on s's pool.
func (s *Store) Holds() *Holds { return &Holds{pool: s.pool} }

const holdColumns = "binding, id, salt, digest, expires_ns, uses, until_ns, assertion, spent"

// Hold reads binding's hold.
func (h *Holds) Hold(ctx context.Context, binding string) (*approval.Hold, error) {
	return readHold(h.pool.QueryRow(ctx, "SELECT "+holdColumns+" FROM credvault_approval_holds WHERE binding = $1", binding))
}

// Add drops ended holds, then inserts hold, or replaces a hold of its
// binding that is no longer live, in one statement; a live hold is kept
// and returned.
func (h *Holds) Add(ctx context.Context, hold *approval.Hold, now time.Time) (*approval.Hold, error) {
	if _, err := h.pool.Exec(ctx, "DELETE FROM credvault_approval_holds WHERE ends_ns <= $1", nanos(now)); err != nil {
		return nil, classify("adding hold", err)
	}
	tag, err := h.pool.Exec(ctx, `INSERT INTO credvault_approval_holds AS h (binding, id, salt, digest, expires_ns, ends_ns)
		VALUES ($1, $2, $3, $4, $5, $5)
		ON CONFLICT (binding) DO UPDATE SET id = excluded.id, salt = excluded.salt, digest = excluded.digest,
			expires_ns = excluded.expires_ns, ends_ns = excluded.ends_ns, uses = 0, until_ns = 0, assertion = NULL, spent = 0
		WHERE h.ends_ns <= $6 OR (h.uses > 0 AND h.spent >= h.uses)`,
		hold.Binding, hold.ID, hold.Salt, hold.Digest, nanos(hold.ExpiresAt), nanos(now))
	if err != nil {
		return nil, classify("adding hold", err)
	}
	if tag.RowsAffected() == 1 {
		return hold.Clone(), nil
	}
	kept, err := h.Hold(ctx, hold.Binding)
	if err == nil && kept == nil {
		err = errors.New("pgstore: adding hold: the live hold it kept is gone")
	}
	return kept, err
}

// Spend takes one use in one UPDATE: replicas spending at once wait on
// the row's lock, and each sees the count the one before committed.
func (h *Holds) Spend(ctx context.Context, binding, id string, a *approval.Approval) (bool, error) {
	assertion, err := json.Marshal(a.Assertion)
	if err != nil {
		return false, fmt.Errorf("pgstore: spending hold: %w", err)
	}
	tag, err := h.pool.Exec(ctx, `UPDATE credvault_approval_holds SET uses = $1, until_ns = $2, assertion = $3,
		ends_ns = GREATEST(expires_ns, $2), spent = spent + 1 WHERE binding = $4 AND id = $5 AND spent < $1`,
		a.Uses, nanos(a.Until), string(assertion), binding, id)
	if err != nil {
		return false, classify("spending hold", err)
	}
	return tag.RowsAffected() == 1, nil
}

func readHold(row pgx.Row) (*approval.Hold, error) {
	var (
		h              approval.Hold
		expires, until int64
		uses           int
		assertion      *string
	)
	err := row.Scan(&h.Binding, &h.ID, &h.Salt, &h.Digest, &expires, &uses, &until, &assertion, &h.Spent)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, classify("reading hold", err)
	}
	h.ExpiresAt = fromNanos(expires)
	if uses > 0 {
		h.Approval = &approval.Approval{Uses: uses, Until: fromNanos(until)}
		if assertion != nil {
			if err := json.Unmarshal([]byte(*assertion), &h.Approval.Assertion); err != nil {
				return nil, fmt.Errorf("pgstore: hold %s: corrupt assertion: %w", h.ID, err)
			}
		}
	}
	return &h, nil
}

// nanos is t in Unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
