package claims

import (
	"context"
	"database/sql"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"time"
)

// Change-log operations (feed_changes.op): the claim is now approved, no
// longer is (revoked, deleted with its service or account), or was
// rejected (it never was approved; the feed serves it as a delete whose
// status says so).
const (
	feedOpUpsert = "upsert"
	feedOpDelete = "delete"
	feedOpReject = "reject"
)

// Retention of the change log (Server.Maintain): a service keeps its last
// feedChangesKeep changes, none older than feedChangesMaxAge. A gateway
// whose cursor is older (one offline for long, or behind a burst of
// changes larger than the log) reads the whole feed again; one polling
// every few seconds never is.
const (
	feedChangesKeep   = 100_000
	feedChangesMaxAge = 7 * 24 * time.Hour
)

// feedChange is one numbered change to a service's feed. For an upsert,
// Claim is the approved claim as the feed serves it; for a delete, only
// its id, namespace, public key and service are set.
type feedChange struct {
	Seq   int64
	Op    string
	Claim Claim
}

// errFeedCursorExpired: the changes after a cursor were pruned, or the
// cursor is past the service's last change (it comes from another
// database, or one restored from an older backup).
var errFeedCursorExpired = errors.New("controlplane: feed cursor expired")

// feedChanges returns up to limit changes of service slug after seq since,
// oldest first, and whether more follow. The changes are read first and the
// horizon second: a prune that ran in between raises the horizon past since
// and the answer is errFeedCursorExpired, never a list with a hole in it.
// The cost is an index range of the changes returned, whatever the feed's
// size.
func (s *Store) feedChanges(ctx context.Context, slug string, since int64, limit int) (changes []feedChange, more bool, err error) {
	rows, err := s.db.QueryContext(ctx, `SELECT f.seq, f.op, f.claim_id, f.namespace, f.public_key,
			COALESCE(c.subject, ''), COALESCE(c.agent_id, ''), COALESCE(c.agent_name, ''), COALESCE(c.approved_at, f.changed_at)
		FROM feed_changes f LEFT JOIN claims c ON c.id = f.claim_id
		WHERE f.service = $1 AND f.seq > $2 ORDER BY f.seq LIMIT $3`, slug, since, limit+1)
	if err != nil {
		return nil, false, sqldb.Err("feed changes", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			ch       feedChange
			approved int64
		)
		c := &ch.Claim
		if err := rows.Scan(&ch.Seq, &ch.Op, &c.ID, &c.Namespace, &c.PublicKey, &c.Subject, &c.AgentID, &c.AgentName, &approved); err != nil {
			return nil, false, sqldb.Err("scan feed change", err)
		}
		c.Service = slug
		if ch.Op == feedOpUpsert {
			c.Status, c.ApprovedAt = StatusApproved, sqldb.FromMicros(approved)
		} else {
			c.Subject, c.AgentID, c.AgentName = "", "", ""
		}
		changes = append(changes, ch)
	}
	if err := rows.Err(); err != nil {
		return nil, false, sqldb.Err("read feed changes", err)
	}
	var version, pruned int64
	err = s.db.QueryRowContext(ctx, `SELECT version, pruned_through FROM feed_state WHERE service = $1`, slug).Scan(&version, &pruned)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, false, sqldb.Err("feed state", err)
	}
	if since < pruned || since > version {
		return nil, false, errFeedCursorExpired
	}
	if len(changes) > limit {
		changes, more = changes[:limit], true
	}
	return changes, more, nil
}

// errFeedAfterUnknown: ?after= names no claim the feed of the service
// ever served.
var errFeedAfterUnknown = web.Validation("after must be the claim_id of a record the feed returned")

// feedKey returns the sort key of claim id of the feed of slug, approved
// now or revoked since: the point a page ?after= it starts from.
func (s *Store) feedKey(ctx context.Context, slug, id string) (feedCursor, error) {
	var approved sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT approved_at FROM claims WHERE id = $1 AND service = $2`, id, slug).Scan(&approved)
	if errors.Is(err, sql.ErrNoRows) || err == nil && !approved.Valid {
		return feedCursor{}, errFeedAfterUnknown
	}
	if err != nil {
		return feedCursor{}, sqldb.Err("feed key", err)
	}
	return feedCursor{approvedAt: approved.Int64, id: id}, nil
}

// pruneFeedChanges bounds the change log: for every service it drops the
// changes made before cutoff and all but the last keep, raising the
// service's horizon (pruned_through) first, in its own statement, so a
// reader racing the deletion sees the horizon move and answers "expired"
// (see feedChanges). It returns the number of changes dropped.
func (s *Store) pruneFeedChanges(ctx context.Context, cutoff time.Time, keep int64) (int64, error) {
	greatest := "MAX"
	if s.db.PG() {
		greatest = "GREATEST"
	}
	horizon := greatest + `(version - $2, COALESCE((SELECT MAX(seq) FROM feed_changes f
		WHERE f.service = feed_state.service AND f.changed_at < $1), 0))`
	if _, err := s.db.Exec(ctx, `UPDATE feed_state SET pruned_through = `+horizon+`
		WHERE `+horizon+` > pruned_through`, sqldb.Micros(cutoff), keep); err != nil {
		return 0, sqldb.Err("feed horizon", err)
	}
	res, err := s.db.Exec(ctx, `DELETE FROM feed_changes
		WHERE seq <= (SELECT pruned_through FROM feed_state s WHERE s.service = feed_changes.service)`)
	if err != nil {
		return 0, sqldb.Err("prune feed changes", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
