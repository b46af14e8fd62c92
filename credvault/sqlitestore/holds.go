package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idnhq/idn/approval"
)

// Holds keeps an approval.Gate's holds in the store's file: a restarted
// gateway honours what its owner approved before, and a use taken is
// synced before the call goes on. It is safe for concurrent use.
type Holds struct{ db *sql.DB }

var _ approval.Store = (*Holds)(nil)

// Holds returns the holds kept in s's file.
func (s *Store) Holds() *Holds { return &Holds{db: s.db} }

const holdColumns = "binding, id, salt, digest, expires_ns, uses, until_ns, assertion, spent"

// Hold reads binding's hold.
func (h *Holds) Hold(ctx context.Context, binding string) (*approval.Hold, error) {
	return readHold(h.db.QueryRowContext(ctx, "SELECT "+holdColumns+" FROM approval_holds WHERE binding = ?", binding))
}

// Add drops ended holds and keeps hold unless a live one is there, in one
// write transaction.
func (h *Holds) Add(ctx context.Context, hold *approval.Hold, now time.Time) (*approval.Hold, error) {
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: adding hold: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "DELETE FROM approval_holds WHERE ends_ns <= ?", nanos(now)); err != nil {
		return nil, fmt.Errorf("sqlitestore: adding hold: %w", err)
	}
	prev, err := readHold(tx.QueryRowContext(ctx, "SELECT "+holdColumns+" FROM approval_holds WHERE binding = ?", hold.Binding))
	if err != nil {
		return nil, err
	}
	if prev != nil && prev.Live(now) {
		return prev, nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO approval_holds (binding, id, salt, digest, expires_ns, ends_ns)
		VALUES (?, ?, ?, ?, ?, ?)`, hold.Binding, hold.ID, hold.Salt, hold.Digest, nanos(hold.ExpiresAt), nanos(hold.ExpiresAt)); err != nil {
		return nil, fmt.Errorf("sqlitestore: adding hold: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("sqlitestore: adding hold: %w", err)
	}
	return hold.Clone(), nil
}

// Spend takes one use in one UPDATE, which SQLite runs under its write
// lock: processes sharing the file never take the same use twice.
func (h *Holds) Spend(ctx context.Context, binding, id string, a *approval.Approval) (bool, error) {
	assertion, err := json.Marshal(a.Assertion)
	if err != nil {
		return false, fmt.Errorf("sqlitestore: spending hold: %w", err)
	}
	res, err := h.db.ExecContext(ctx, `UPDATE approval_holds SET uses = ?, until_ns = ?, assertion = ?,
		ends_ns = max(expires_ns, ?), spent = spent + 1 WHERE binding = ? AND id = ? AND spent < ?`,
		a.Uses, nanos(a.Until), string(assertion), nanos(a.Until), binding, id, a.Uses)
	if err != nil {
		return false, fmt.Errorf("sqlitestore: spending hold: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlitestore: spending hold: %w", err)
	}
	return n == 1, nil
}

func readHold(row *sql.Row) (*approval.Hold, error) {
	var (
		h              approval.Hold
		expires, until int64
		uses           int
		assertion      sql.NullString
	)
	err := row.Scan(&h.Binding, &h.ID, &h.Salt, &h.Digest, &expires, &uses, &until, &assertion, &h.Spent)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: reading hold: %w", err)
	}
	h.ExpiresAt = fromNanos(expires)
	if uses > 0 {
		h.Approval = &approval.Approval{Uses: uses, Until: fromNanos(until)}
		if assertion.Valid {
			if err := json.Unmarshal([]byte(assertion.String), &h.Approval.Assertion); err != nil {
				return nil, fmt.Errorf("sqlitestore: hold %s: corrupt assertion: %w", h.ID, err)
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
