package claims

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Claim statuses.
const (
	StatusPending  = "pending"
	StatusApproved = "approved"
	StatusRejected = "rejected"
	StatusRevoked  = "revoked"
	StatusExpired  = "expired"
)

// Claim is the authorisation of a (namespace, public key, Service) tuple.
// Zero times mean "not happened".
type Claim struct {
	ID               string
	Namespace        string
	PublicKey        string // "ed25519:<base64>"
	Service          string // service slug
	AgentIP          string
	Subject          string
	AgentID          string
	AgentName        string
	Status           string
	CreatedAt        time.Time
	UpdatedAt        time.Time
	ApprovedAt       time.Time
	RejectedAt       time.Time
	RevokedAt        time.Time
	ExpiredAt        time.Time
	ApprovalTxHash   string
	RevocationTxHash string
	RegistryError    string // why the last registry write failed; "" once a write succeeded
}

const claimColumns = `id, namespace, public_key, Service, agent_ip, subject, agent_id, agent_name, status,
	created_at, updated_at, approved_at, rejected_at, revoked_at, expired_at, approval_tx_hash, revocation_tx_hash, registry_error`

func scanClaim(row interface{ Scan(...any) error }) (Claim, error) {
	var (
		c                                   Claim
		created, updated                    int64
		approved, rejected, revoked, expird sql.NullInt64
		approvalTx, revocationTx, regErr    sql.NullString
	)
	err := row.Scan(&c.ID, &c.Namespace, &c.PublicKey, &c.Service, &c.AgentIP, &c.Subject, &c.AgentID, &c.AgentName, &c.Status,
		&created, &updated, &approved, &rejected, &revoked, &expird, &approvalTx, &revocationTx, &regErr)
	c.CreatedAt, c.UpdatedAt = sqldb.FromMicros(created), sqldb.FromMicros(updated)
	c.ApprovedAt, c.RejectedAt = sqldb.FromNullMicros(approved), sqldb.FromNullMicros(rejected)
	c.RevokedAt, c.ExpiredAt = sqldb.FromNullMicros(revoked), sqldb.FromNullMicros(expird)
	c.ApprovalTxHash, c.RevocationTxHash = approvalTx.String, revocationTx.String
	c.RegistryError = regErr.String
	return c, err
}

func scanClaims(rows *sql.Rows) ([]Claim, error) {
	defer rows.Close()
	out := []Claim{}
	for rows.Next() {
		c, err := scanClaim(rows)
		if err != nil {
			return nil, sqldb.Err("scan claim", err)
		}
		out = append(out, c)
	}
	return out, sqldb.Err("read claims", rows.Err())
}

// pendingBudget bounds the pending claims of a namespace. Counting per
// service keeps a flood through one service (a hostile service's key, or
// self-made agent keys sent through one gateway) from refusing the
// genuine claims of every other service; the share of one agent network
// keeps a single address from spending even its own service's budget.
type pendingBudget struct {
	perService int // pending claims per namespace and service
	perAgent   int // of those, from one agent network (see agentNet)
}

// agentNet is the unit the per-agent budget counts: an IPv4 address, or
// the /64 of an IPv6 one, since a single IPv6 host usually holds a whole
// /64. It is "" for an empty or unparsable address.
func agentNet(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ""
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.WithZone("").Prefix(64)
	return p.String()
}

// submitStatements are the statements of a claim submission, prepared at
// Open and then once per connection, so a submission does not parse them
// (and compile the claims triggers) again while it holds the write lock.
// PostgreSQL runs them all in one call of claims_submit; SQLite, in
// process, one by one.
type submitStatements struct {
	call, final                             *sql.Stmt // PostgreSQL; final on both
	namespace, expire, live, budget, insert *sql.Stmt // SQLite
}

// finalClaimQuery finds the latest final claim of a tuple: the one the
// owner revoked or rejected last.
const finalClaimQuery = `SELECT ` + claimColumns + ` FROM claims
	WHERE namespace = $1 AND public_key = $2 AND service = $3 AND status IN ('revoked', 'rejected')
	ORDER BY COALESCE(revoked_at, rejected_at) DESC, id DESC LIMIT 1`

func (s *Store) prepareSubmit(ctx context.Context) (err error) {
	prepare := func(q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		st, err = s.db.Prepare(ctx, q)
		return st
	}
	if s.db.PG() {
		s.submit.call = prepare(`SELECT outcome, claim FROM claims_submit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`)
		s.submit.final = prepare(finalClaimQuery)
		return sqldb.Err("prepare submission", err)
	}
	s.submit = submitStatements{
		final:     prepare(finalClaimQuery),
		namespace: prepare(`SELECT deactivated_at FROM namespaces WHERE namespace = $1`),
		expire: prepare(`UPDATE claims SET status = 'expired', expired_at = $3, updated_at = $3
			WHERE namespace = $1 AND service = $2 AND status = 'pending' AND created_at <= $4`),
		live: prepare(`SELECT ` + claimColumns + ` FROM claims
			WHERE namespace = $1 AND public_key = $2 AND service = $3 AND status IN ('pending', 'approved')`),
		budget: prepare(`SELECT
			COALESCE((SELECT n FROM claim_counts WHERE namespace = $1 AND service = $2 AND status = 'pending'), 0),
			COALESCE((SELECT n FROM pending_agents WHERE namespace = $1 AND service = $2 AND agent_net = $3), 0)`),
		insert: prepare(`INSERT INTO claims (id, namespace, public_key, Service, agent_ip, agent_net, subject, agent_id, agent_name, status, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10, $10)`),
	}
	return sqldb.Err("prepare submission", err)
}

// submitClaim creates a pending claim, or returns the live (pending or
// approved) claim of the same tuple with created == false; a tuple the
// owner revoked or rejected, and that has no live claim, files nothing:
// the answer is that final claim, and only the owner approves the tuple
// (reapprove). SQLite
// transactions are exclusive, so the budget read before the insert holds;
// on PostgreSQL, where the submissions of a namespace run side by side,
// claims_submit also reads the counters after its own increment, which
// holds their rows to commit, and refuses (SubmitRefused) a claim that a
// concurrent submission's commit took the room of. A pending claim of the
// service created at or before pendingCutoff is expired on the spot rather
// than returned or counted, so a stale request never blocks a fresh one.
//
// Every step costs the same whatever the size of the pending pile: the
// budget is read from the counters that the claims triggers keep
// (claim_counts, pending_agents), the tuple from its unique index, and the
// expiry touches only the claims it expires.
func (s *Store) submitClaim(ctx context.Context, in Claim, budget pendingBudget, pendingCutoff, now time.Time) (c Claim, created bool, err error) {
	c = in
	c.ID, c.Status = sqldb.NewID("clm_"), StatusPending
	c.CreatedAt, c.UpdatedAt = now.UTC().Truncate(time.Microsecond), now.UTC().Truncate(time.Microsecond)
	net := agentNet(in.AgentIP)
	if s.db.PG() {
		// A live claim of the tuple wins over its final one: only when
		// one is revoked or rejected does it take a second probe to tell.
		ended, err := scanClaim(s.submit.final.QueryRowContext(ctx, c.Namespace, c.PublicKey, c.Service))
		if err == nil {
			var live int
			err = s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM claims WHERE namespace = $1 AND public_key = $2 AND service = $3
				AND status IN ('pending', 'approved')`, c.Namespace, c.PublicKey, c.Service).Scan(&live)
			if err == nil && live == 0 {
				return ended, false, nil
			}
		}
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return c, false, sqldb.Err("final claim lookup", err)
		}
		var (
			outcome string
			live    sql.NullString
		)
		err = s.submit.call.QueryRowContext(ctx, c.ID, c.Namespace, c.PublicKey, c.Service, c.AgentIP, net, c.Subject, c.AgentID, c.AgentName,
			sqldb.Micros(now), sqldb.Micros(pendingCutoff), budget.perService, budget.perAgent).Scan(&outcome, &live)
		if refusal, ok := sqldb.SubmitRefusal(err); ok {
			outcome, err = refusal, nil
		}
		if err != nil {
			return c, false, sqldb.Err("submit claim", err)
		}
		switch outcome {
		case "created":
			return c, true, nil
		case "live":
			c, err = scanClaim(s.db.QueryRowContext(ctx, `SELECT `+claimColumns+` FROM claims WHERE id = $1`, live.String))
			return c, false, sqldb.Err("claim lookup", err)
		case "busy":
			return c, false, fmt.Errorf("%w: the live claim of the tuple kept changing during the submission", sqldb.ErrBusy)
		}
		if e, ok := submitRefusals[outcome]; ok {
			return c, false, e
		}
		return c, false, fmt.Errorf("controlplane: claims_submit answered %q", outcome)
	}
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		st := func(stmt *sql.Stmt) *sql.Stmt { return tx.StmtContext(ctx, stmt) }
		var deactivated sql.NullInt64
		err := st(s.submit.namespace).QueryRowContext(ctx, in.Namespace).Scan(&deactivated)
		if errors.Is(err, sql.ErrNoRows) {
			return errNamespaceNotFound
		}
		if err != nil {
			return sqldb.Err("namespace", err)
		}
		if deactivated.Valid {
			return errNamespaceDeactivated
		}
		if _, err := st(s.submit.expire).ExecContext(ctx, in.Namespace, in.Service, sqldb.Micros(now), sqldb.Micros(pendingCutoff)); err != nil {
			return sqldb.Err("expire claims", err)
		}
		live, err := scanClaim(st(s.submit.live).QueryRowContext(ctx, in.Namespace, in.PublicKey, in.Service))
		if err == nil {
			c = live
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return sqldb.Err("claim lookup", err)
		}
		ended, err := scanClaim(st(s.submit.final).QueryRowContext(ctx, in.Namespace, in.PublicKey, in.Service))
		if err == nil {
			c = ended
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return sqldb.Err("final claim lookup", err)
		}
		var pending, fromAgent int
		if err := st(s.submit.budget).QueryRowContext(ctx, in.Namespace, in.Service, net).Scan(&pending, &fromAgent); err != nil {
			return sqldb.Err("count pending", err)
		}
		switch {
		case pending >= budget.perService:
			return errPendingLimit
		case fromAgent >= budget.perAgent:
			return errAgentPendingLimit
		}
		if _, err = st(s.submit.insert).ExecContext(ctx, c.ID, c.Namespace, c.PublicKey, c.Service, c.AgentIP, net,
			c.Subject, c.AgentID, c.AgentName, sqldb.Micros(now)); err != nil {
			return sqldb.Err("insert claim", err)
		}
		created = true
		return nil
	})
	return c, created, err
}

// submitRefusals are claims_submit's refusals.
var submitRefusals = map[string]error{
	"namespace_not_found":   errNamespaceNotFound,
	"namespace_deactivated": errNamespaceDeactivated,
	"pending_limit":         errPendingLimit,
	"agent_pending_limit":   errAgentPendingLimit,
}

// transitions is the claim state machine: action → (from, to, timestamp column).
var transitions = map[string]struct{ from, to, column string }{
	"approve": {StatusPending, StatusApproved, "approved_at"},
	"reject":  {StatusPending, StatusRejected, "rejected_at"},
	"revoke":  {StatusApproved, StatusRevoked, "revoked_at"},
}

// transition applies action to claim id of owner ns. It is one conditional
// UPDATE (… WHERE status = <from>): concurrent moves of one claim serialise
// on the row, and a loser sees the winner's status and gets a
// *transitionError. A pending claim older than pendingCutoff counts as
// expired even before the expiry job has run, and an inactive namespace
// approves nothing.
func (s *Store) transition(ctx context.Context, ns, id, action string, pendingCutoff, now time.Time) (Claim, error) {
	t, ok := transitions[action]
	if !ok {
		return Claim{}, &transitionError{Action: action, From: "unknown"}
	}
	cond := ""
	args := []any{id, ns, t.from, t.to, sqldb.Micros(now)}
	if t.from == StatusPending {
		cond = ` AND created_at > $6 AND namespace IN (SELECT namespace FROM namespaces WHERE deactivated_at IS NULL)`
		args = append(args, sqldb.Micros(pendingCutoff))
	}
	// A failed UPDATE is explained by re-reading the row; if it is back in
	// (or still in) the source state because a concurrent move committed
	// in between, the UPDATE is simply tried again.
	for attempt := 0; ; attempt++ {
		c, err := scanClaim(s.db.WriteRow(ctx, `UPDATE claims SET status = $4, `+t.column+` = $5, updated_at = $5
			WHERE id = $1 AND namespace = $2 AND status = $3`+cond+` RETURNING `+claimColumns, args...))
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return c, sqldb.Err("transition", err)
		}
		var (
			status      string
			created     int64
			deactivated sql.NullInt64
		)
		err = s.db.QueryRowContext(ctx, `SELECT c.status, c.created_at, n.deactivated_at FROM claims c
			JOIN namespaces n ON n.namespace = c.namespace WHERE c.id = $1 AND c.namespace = $2`, id, ns).Scan(&status, &created, &deactivated)
		if errors.Is(err, sql.ErrNoRows) {
			return c, ErrClaimNotFound
		}
		if err != nil {
			return c, sqldb.Err("claim", err)
		}
		switch {
		case status != t.from:
			return c, &transitionError{Action: action, From: status}
		case t.from == StatusPending && created <= sqldb.Micros(pendingCutoff):
			return c, &transitionError{Action: action, From: StatusExpired}
		case t.from == StatusPending && deactivated.Valid:
			return c, errNamespaceDeactivated
		case attempt == 2:
			return c, fmt.Errorf("controlplane: claim %s kept changing during %s", id, action)
		}
	}
}

// reapprove approves the tuple of claim id of ns, which the owner revoked
// or rejected: a final claim stays as it is, so the approval is a new
// claim of the tuple with the old one's agent fields, approved at now. It
// needs an active namespace and the service to exist still; a tuple that
// has a live claim again (one filed before revocations were answered) is
// a *transitionError.
func (s *Store) reapprove(ctx context.Context, ns, id string, now time.Time) (Claim, error) {
	var c Claim
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		old, err := scanClaim(tx.QueryRowContext(ctx, `SELECT `+claimColumns+` FROM claims WHERE id = $1 AND namespace = $2`, id, ns))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return ErrClaimNotFound
		case err != nil:
			return sqldb.Err("claim", err)
		case !final(old.Status):
			return &transitionError{Action: "approve", From: old.Status}
		}
		var deactivated sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT deactivated_at FROM namespaces WHERE namespace = $1`, ns).Scan(&deactivated); err != nil {
			return sqldb.Err("namespace", err)
		}
		if deactivated.Valid {
			return errNamespaceDeactivated
		}
		var services int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM services WHERE slug = $1`, old.Service).Scan(&services); err != nil {
			return sqldb.Err("service", err)
		}
		if services == 0 {
			return ErrServiceNotFound
		}
		at := now.UTC().Truncate(time.Microsecond)
		c = Claim{ID: sqldb.NewID("clm_"), Namespace: old.Namespace, PublicKey: old.PublicKey, Service: old.Service, AgentIP: old.AgentIP,
			Subject: old.Subject, AgentID: old.AgentID, AgentName: old.AgentName, Status: StatusApproved, CreatedAt: at, UpdatedAt: at, ApprovedAt: at}
		_, err = tx.ExecContext(ctx, `INSERT INTO claims (id, namespace, public_key, service, agent_ip, agent_net, subject, agent_id, agent_name,
			status, created_at, updated_at, approved_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'approved', $10, $10, $10)`,
			c.ID, c.Namespace, c.PublicKey, c.Service, c.AgentIP, agentNet(c.AgentIP), c.Subject, c.AgentID, c.AgentName, sqldb.Micros(at))
		if sqldb.IsUniqueViolation(err) {
			return &transitionError{Action: "approve", From: old.Status + " (the agent has a live claim again)"}
		}
		return sqldb.Err("insert claim", err)
	})
	return c, err
}

// final reports whether status ends its claim for good: the owner revoked
// or rejected it, and only the owner approves its tuple again.
func final(status string) bool { return status == StatusRevoked || status == StatusRejected }

// rejectPending rejects, in one statement, every pending claim of service
// slug in ns that is not past pendingCutoff, and returns them as rejected.
// Like a single reject it needs an active namespace; the webhook triggers
// see one status change per claim.
func (s *Store) rejectPending(ctx context.Context, ns, slug string, pendingCutoff, now time.Time) ([]Claim, error) {
	var claims []Claim
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE claims SET status = 'rejected', rejected_at = $4, updated_at = $4
		WHERE namespace = $1 AND service = $2 AND status = 'pending' AND created_at > $3
			AND namespace IN (SELECT namespace FROM namespaces WHERE deactivated_at IS NULL)
		RETURNING `+claimColumns, ns, slug, sqldb.Micros(pendingCutoff), sqldb.Micros(now))
		if err != nil {
			return sqldb.Err("reject pending", err)
		}
		claims, err = scanClaims(rows)
		return err
	})
	return claims, err
}

// expirePending moves pending claims created at or before cutoff to expired.
func (s *Store) expirePending(ctx context.Context, cutoff, now time.Time) (int64, error) {
	res, err := s.db.Exec(ctx, `UPDATE claims SET status = 'expired', expired_at = $2, updated_at = $2
		WHERE status = 'pending' AND created_at <= $1`, sqldb.Micros(cutoff), sqldb.Micros(now))
	if err != nil {
		return 0, sqldb.Err("expire claims", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// Page is one page of claims and the total number of matches. HasMore
// tells whether claims follow the page in listing order; HasNewer (owner
// listing only) whether newer claims precede it.
type Page struct {
	Claims   []Claim
	Total    int64
	HasMore  bool
	HasNewer bool
}

const feedColumns = `id, namespace, public_key, Service, subject, agent_id, agent_name, approved_at`

func scanFeedClaims(rows *sql.Rows) ([]Claim, error) {
	defer rows.Close()
	out := make([]Claim, 0, 64)
	for rows.Next() {
		var c Claim
		var approved int64
		if err := rows.Scan(&c.ID, &c.Namespace, &c.PublicKey, &c.Service, &c.Subject, &c.AgentID, &c.AgentName, &approved); err != nil {
			return nil, sqldb.Err("scan claim", err)
		}
		c.Status, c.ApprovedAt = StatusApproved, sqldb.FromMicros(approved)
		out = append(out, c)
	}
	return out, sqldb.Err("read claims", rows.Err())
}

// feedState is the approved count and change version of a service's feed.
func (s *Store) feedState(ctx context.Context, slug string) (approved, version int64, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT approved, version FROM feed_state WHERE service = $1`, slug).Scan(&approved, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	return approved, version, sqldb.Err("feed state", err)
}

// feedCursor is the sort key of the last claim of a page.
type feedCursor struct {
	approvedAt int64
	id         string
}

// feed pages the approved claims of a service in (approved_at, id) order,
// so new approvals append and paging does not skip. With after set, the
// page starts right after that key (keyset paging: cost independent of the
// offset); otherwise it starts at offset. Total is not counted here (see
// feedState).
func (s *Store) feed(ctx context.Context, slug string, after *feedCursor, limit, offset int) (Page, error) {
	var (
		rows *sql.Rows
		err  error
	)
	if after != nil {
		rows, err = s.db.QueryContext(ctx, `SELECT `+feedColumns+` FROM claims
			WHERE service = $1 AND status = 'approved' AND (approved_at, id) > ($2, $3)
			ORDER BY approved_at, id LIMIT $4`, slug, after.approvedAt, after.id, limit+1)
	} else {
		// Deferred join: the page's ids are found on the covering index, so
		// skipping offset rows costs index steps, not table lookups.
		rows, err = s.db.QueryContext(ctx, `SELECT `+feedColumns+` FROM claims WHERE id IN (
				SELECT id FROM claims WHERE service = $1 AND status = 'approved'
				ORDER BY approved_at, id LIMIT $2 OFFSET $3)
			ORDER BY approved_at, id`, slug, limit+1, offset)
	}
	if err != nil {
		return Page{}, sqldb.Err("feed", err)
	}
	var p Page
	if p.Claims, err = scanFeedClaims(rows); err != nil {
		return p, err
	}
	if len(p.Claims) > limit {
		p.Claims, p.HasMore = p.Claims[:limit], true
	}
	return p, nil
}

// Cursor places a page of a namespace's claims: right after claim
// After (older claims), right before claim Before (newer ones), or at
// Offset. The zero value is the first page.
type Cursor struct {
	After, Before string
	Offset        int
}

// ownerClaims pages a namespace's claims, newest first ((created_at, id)
// descending), optionally filtered by status and service. A cursor page is
// one range of an index ending in (created_at, id), so it costs the same
// anywhere in the listing; the cursor claim only gives the position, so
// paging stays exact while claims arrive or change status. A Before page
// that reaches the newest claim is the first page. An unknown cursor
// claim is ErrClaimNotFound. Total comes from claim_counts.
func (s *Store) ownerClaims(ctx context.Context, ns, status, slug string, limit int, cur Cursor) (Page, error) {
	conds := []string{"namespace = $1"}
	args := []any{ns}
	if status != "" {
		args = append(args, status)
		conds = append(conds, "status = $"+strconv.Itoa(len(args)))
	}
	if slug != "" {
		args = append(args, slug)
		conds = append(conds, "service = $"+strconv.Itoa(len(args)))
	}
	var p Page
	if err := s.db.QueryRowContext(ctx, `SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) FROM claim_counts WHERE `+strings.Join(conds, " AND "), args...).Scan(&p.Total); err != nil {
		return p, sqldb.Err("count claims", err)
	}
	var (
		q    string
		rows *sql.Rows
		err  error
	)
	n := len(args)
	switch {
	case cur.After != "" || cur.Before != "":
		id, op, order := cur.After, "<", "DESC"
		if id == "" {
			id, op, order = cur.Before, ">", "ASC"
		}
		var at int64
		err = s.db.QueryRowContext(ctx, `SELECT created_at FROM claims WHERE id = $1 AND namespace = $2`, id, ns).Scan(&at)
		if errors.Is(err, sql.ErrNoRows) {
			return p, ErrClaimNotFound
		}
		if err != nil {
			return p, sqldb.Err("claim cursor", err)
		}
		q = `SELECT ` + claimColumns + ` FROM claims WHERE ` + strings.Join(conds, " AND ") +
			` AND (created_at, id) ` + op + ` ($` + strconv.Itoa(n+1) + `, $` + strconv.Itoa(n+2) + `)` +
			` ORDER BY created_at ` + order + `, id ` + order + ` LIMIT $` + strconv.Itoa(n+3)
		rows, err = s.db.QueryContext(ctx, q, append(args, at, id, limit+1)...)
	default:
		// Deferred join: the page's ids are found on the index alone, so
		// skipping offset rows costs index steps, not table lookups.
		q = `SELECT ` + claimColumns + ` FROM claims WHERE id IN (SELECT id FROM claims WHERE ` + strings.Join(conds, " AND ") +
			` ORDER BY created_at DESC, id DESC LIMIT $` + strconv.Itoa(n+1) + ` OFFSET $` + strconv.Itoa(n+2) + `) ORDER BY created_at DESC, id DESC`
		rows, err = s.db.QueryContext(ctx, q, append(args, limit+1, cur.Offset)...)
	}
	if err != nil {
		return p, sqldb.Err("list claims", err)
	}
	if p.Claims, err = scanClaims(rows); err != nil {
		return p, err
	}
	more := len(p.Claims) > limit
	if more {
		p.Claims = p.Claims[:limit]
	}
	switch {
	case cur.Before != "" && !more:
		return s.ownerClaims(ctx, ns, status, slug, limit, Cursor{})
	case cur.Before != "":
		slices.Reverse(p.Claims)
		p.HasMore, p.HasNewer = true, true
	default:
		p.HasMore, p.HasNewer = more, cur.After != "" || cur.Offset > 0
	}
	return p, nil
}

// latestClaim returns the claim that decides a tuple: the live one when
// present, else the most recently changed one.
func (s *Store) latestClaim(ctx context.Context, ns, publicKey, slug string) (Claim, error) {
	c, err := scanClaim(s.db.QueryRowContext(ctx, `SELECT `+claimColumns+` FROM claims
		WHERE namespace = $1 AND public_key = $2 AND service = $3
		ORDER BY CASE WHEN status IN ('pending', 'approved') THEN 0 ELSE 1 END, updated_at DESC, id DESC LIMIT 1`,
		ns, publicKey, slug))
	if errors.Is(err, sql.ErrNoRows) {
		return c, ErrClaimNotFound
	}
	return c, sqldb.Err("claim", err)
}

// namespaceClaims returns every claim of a namespace, oldest first; with
// approvedOnly, only approved ones.
func (s *Store) namespaceClaims(ctx context.Context, ns string, approvedOnly bool) ([]Claim, error) {
	q := `SELECT ` + claimColumns + ` FROM claims WHERE namespace = $1`
	if approvedOnly {
		q += ` AND status = 'approved'`
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY created_at, id`, ns)
	if err != nil {
		return nil, sqldb.Err("namespace claims", err)
	}
	return scanClaims(rows)
}

// insertSeedClaim stores a claim with any status, for the test seed.
func (s *Store) insertSeedClaim(ctx context.Context, c Claim, now time.Time) (Claim, error) {
	c.ID = sqldb.NewID("clm_")
	c.CreatedAt, c.UpdatedAt = now.UTC().Truncate(time.Microsecond), now.UTC().Truncate(time.Microsecond)
	var approved, rejected, revoked, expired sql.NullInt64
	at := sqldb.NullMicros(now)
	switch c.Status {
	case StatusApproved:
		approved = at
	case StatusRejected:
		rejected = at
	case StatusRevoked:
		approved, revoked = at, at
	case StatusExpired:
		expired = at
	}
	_, err := s.db.Exec(ctx, `INSERT INTO claims (id, namespace, public_key, Service, agent_ip, subject, agent_id, agent_name, status,
			created_at, updated_at, approved_at, rejected_at, revoked_at, expired_at)
		VALUES ($1, $2, $3, $4, '', '', '', '', $5, $6, $6, $7, $8, $9, $10)`,
		c.ID, c.Namespace, c.PublicKey, c.Service, c.Status, sqldb.Micros(now), approved, rejected, revoked, expired)
	if sqldb.IsUniqueViolation(err) {
		return c, web.Validation("claim for namespace %q, key and service %q already live", c.Namespace, c.Service)
	}
	if err != nil {
		return c, sqldb.Err("insert claim", err)
	}
	c.ApprovedAt, c.RejectedAt, c.RevokedAt, c.ExpiredAt = sqldb.FromNullMicros(approved), sqldb.FromNullMicros(rejected), sqldb.FromNullMicros(revoked), sqldb.FromNullMicros(expired)
	return c, nil
}
