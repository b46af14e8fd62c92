package actions

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
)

// The states of an action request.
const (
	StatusPending  = "pending"
	StatusApproved = "approved"
	StatusDenied   = "denied"
	StatusExpired  = "expired"
)

// Action is one request as stored.
type Action struct {
	ID         string
	Namespace  string // the owner's
	GatewayID  string
	GatewayKey string
	Connection string
	Service    string
	AgentNS    string
	AgentKey   string
	AgentName  string
	Subject    string
	Target     string
	Document   string
	Digest     string
	Status     string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	DecidedAt  time.Time
	Uses       int
	Until      time.Time
	Assertion  *approval.Assertion
}

// Grant is the challenge input of a's approval with uses and until.
func (a Action) Grant(uses int, until time.Time) approval.Grant {
	return approval.Grant{ActionID: a.ID, Gateway: a.GatewayKey, Digest: a.Digest, ExpiresAt: a.ExpiresAt, Uses: uses, Until: until}
}

var (
	errNotFound = errors.New("actions: no such action request")
	errConflict = errors.New("actions: the action request is not pending")
	errExists   = errors.New("actions: an action request of that id exists")
	errTooMany  = errors.New("actions: too many pending action requests")
)

type store struct{ db *sqldb.DB }

const columns = `id, namespace, gateway_id, gateway_key, connection_id, service, agent_namespace, agent_key, agent_name, subject,
	target, document, digest, status, created_at, expires_at, decided_at, uses, until_at, assertion`

func scan(row interface{ Scan(...any) error }, now time.Time) (Action, error) {
	var (
		a                       Action
		created, expires, until int64
		decided                 sql.NullInt64
		assertion               string
	)
	err := row.Scan(&a.ID, &a.Namespace, &a.GatewayID, &a.GatewayKey, &a.Connection, &a.Service, &a.AgentNS, &a.AgentKey, &a.AgentName,
		&a.Subject, &a.Target, &a.Document, &a.Digest, &a.Status, &created, &expires, &decided, &a.Uses, &until, &assertion)
	if errors.Is(err, sql.ErrNoRows) {
		return a, errNotFound
	}
	if err != nil {
		return a, sqldb.Err("action", err)
	}
	a.CreatedAt, a.ExpiresAt = sqldb.FromMicros(created), sqldb.FromMicros(expires)
	if decided.Valid {
		a.DecidedAt = sqldb.FromMicros(decided.Int64)
	}
	if until != 0 {
		a.Until = sqldb.FromMicros(until)
	}
	if assertion != "" {
		a.Assertion = new(approval.Assertion)
		if err := json.Unmarshal([]byte(assertion), a.Assertion); err != nil {
			return a, err
		}
	}
	if a.Status == StatusPending && !now.Before(a.ExpiresAt) {
		a.Status = StatusExpired
	}
	return a, nil
}

// insert files a, unless ns already holds max pending requests.
func (s *store) insert(ctx context.Context, a Action, max int, now time.Time) error {
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM actions WHERE namespace = $1 AND status = 'pending' AND expires_at > $2`,
			a.Namespace, sqldb.Micros(now)).Scan(&n); err != nil {
			return sqldb.Err("count actions", err)
		}
		if n >= max {
			return errTooMany
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO actions (`+columns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 'pending', $14, $15, NULL, 0, 0, '')
			ON CONFLICT (id) DO NOTHING`,
			a.ID, a.Namespace, a.GatewayID, a.GatewayKey, a.Connection, a.Service, a.AgentNS, a.AgentKey, a.AgentName, a.Subject,
			a.Target, a.Document, a.Digest, sqldb.Micros(a.CreatedAt), sqldb.Micros(a.ExpiresAt))
		if err != nil {
			return sqldb.Err("insert action", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errExists
		}
		return nil
	})
}

func (s *store) get(ctx context.Context, ns, id string, now time.Time) (Action, error) {
	return scan(s.db.QueryRowContext(ctx, `SELECT `+columns+` FROM actions WHERE id = $1 AND namespace = $2`, id, ns), now)
}

func (s *store) byGateway(ctx context.Context, gatewayKey, id string, now time.Time) (Action, error) {
	return scan(s.db.QueryRowContext(ctx, `SELECT `+columns+` FROM actions WHERE id = $1 AND gateway_key = $2`, id, gatewayKey), now)
}

func (s *store) list(ctx context.Context, ns, status string, now time.Time, limit int) ([]Action, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+columns+` FROM actions WHERE namespace = $1 AND status = $2 AND expires_at > $3
		ORDER BY created_at DESC, id LIMIT $4`, ns, status, sqldb.Micros(now), limit)
	if err != nil {
		return nil, sqldb.Err("list actions", err)
	}
	defer rows.Close()
	var out []Action
	for rows.Next() {
		a, err := scan(rows, now)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, sqldb.Err("list actions", rows.Err())
}

// decide moves a pending, unexpired request to status, with the approval's
// terms and assertion when approved.
func (s *store) decide(ctx context.Context, ns, id, status string, uses int, until time.Time, assertion *approval.Assertion, now time.Time) error {
	enc := ""
	if assertion != nil {
		b, err := json.Marshal(assertion)
		if err != nil {
			return err
		}
		enc = string(b)
	}
	var untilAt int64
	if !until.IsZero() {
		untilAt = sqldb.Micros(until)
	}
	res, err := s.db.Exec(ctx, `UPDATE actions SET status = $1, decided_at = $2, uses = $3, until_at = $4, assertion = $5
		WHERE id = $6 AND namespace = $7 AND status = 'pending' AND expires_at > $2`,
		status, sqldb.Micros(now), uses, untilAt, enc, id, ns)
	if err != nil {
		return sqldb.Err("decide action", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := s.get(ctx, ns, id, now); err != nil {
			return err
		}
		return errConflict
	}
	return nil
}

func (s *store) prune(ctx context.Context, cutoff time.Time) error {
	_, err := s.db.Exec(ctx, `DELETE FROM actions WHERE expires_at < $1 AND until_at < $1`, sqldb.Micros(cutoff))
	return sqldb.Err("prune actions", err)
}
