package webhooks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
)

// store holds the webhooks and their outbox. It reads the services table
// for ownership: a webhook belongs to a service, a service to a namespace.
type store struct{ db *sqldb.DB }

// Delivery states.
const (
	deliveryPending   = "pending"
	deliveryDelivered = "delivered"
	deliveryFailed    = "failed"
	deliveryCanceled  = "canceled"
)

func encodeEvents(events []string) string { return "," + strings.Join(events, ",") + "," }

func decodeEvents(s string) []string { return strings.Split(strings.Trim(s, ","), ",") }

const webhookColumns = `id, service_id, url, events, created_at, updated_at`

func scanWebhook(row interface{ Scan(...any) error }) (Webhook, error) {
	var (
		wh               Webhook
		events           string
		created, updated int64
	)
	err := row.Scan(&wh.ID, &wh.ServiceID, &wh.URL, &events, &created, &updated)
	wh.Events, wh.CreatedAt, wh.UpdatedAt = decodeEvents(events), sqldb.FromMicros(created), sqldb.FromMicros(updated)
	return wh, err
}

// createWebhook stores a webhook of one of owner's services, refusing when
// the service already has max webhooks. The service row is locked so the
// limit holds under concurrency.
func (s *store) createWebhook(ctx context.Context, owner string, wh Webhook, sealed string, max int, now time.Time) (Webhook, error) {
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		var id string
		err := tx.QueryRowContext(ctx, `SELECT id FROM services WHERE id = $1 AND owner = $2`+s.db.ForUpdate(), wh.ServiceID, owner).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return errServiceNotFound
		}
		if err != nil {
			return sqldb.Err("service", err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhooks WHERE service_id = $1`, wh.ServiceID).Scan(&n); err != nil {
			return sqldb.Err("count webhooks", err)
		}
		if n >= max {
			return errWebhookLimit
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO webhooks (id, service_id, url, events, secret, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $6)`, wh.ID, wh.ServiceID, wh.URL, encodeEvents(wh.Events), sealed, sqldb.Micros(now))
		return sqldb.Err("insert webhook", err)
	})
	wh.CreatedAt, wh.UpdatedAt = sqldb.FromMicros(sqldb.Micros(now)), sqldb.FromMicros(sqldb.Micros(now))
	return wh, err
}

func (s *store) listWebhooks(ctx context.Context, owner, serviceID string) ([]Webhook, error) {
	err := s.db.QueryRowContext(ctx, `SELECT id FROM services WHERE id = $1 AND owner = $2`, serviceID, owner).Scan(new(string))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errServiceNotFound
	}
	if err != nil {
		return nil, sqldb.Err("service", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE service_id = $1 ORDER BY created_at, id`, serviceID)
	if err != nil {
		return nil, sqldb.Err("list webhooks", err)
	}
	defer rows.Close()
	out := []Webhook{}
	for rows.Next() {
		wh, err := scanWebhook(rows)
		if err != nil {
			return nil, sqldb.Err("scan webhook", err)
		}
		out = append(out, wh)
	}
	return out, sqldb.Err("list webhooks", rows.Err())
}

// webhook returns webhook wid of service serviceID of owner; anything else
// is reported as absent.
func (s *store) webhook(ctx context.Context, owner, serviceID, wid string) (Webhook, error) {
	wh, err := scanWebhook(s.db.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks
		WHERE id = $1 AND service_id = $2 AND service_id IN (SELECT id FROM services WHERE owner = $3)`, wid, serviceID, owner))
	if errors.Is(err, sql.ErrNoRows) {
		return wh, errWebhookNotFound
	}
	return wh, sqldb.Err("webhook", err)
}

func (s *store) updateWebhook(ctx context.Context, owner, serviceID, wid string, url *string, events *[]string, now time.Time) (Webhook, error) {
	if _, err := s.webhook(ctx, owner, serviceID, wid); err != nil {
		return Webhook{}, err
	}
	sets := []string{"updated_at = $2"}
	args := []any{wid, sqldb.Micros(now)}
	if url != nil {
		args = append(args, *url)
		sets = append(sets, "url = $3")
	}
	if events != nil {
		args = append(args, encodeEvents(*events))
		sets = append(sets, "events = $"+strconv.Itoa(len(args)))
	}
	wh, err := scanWebhook(s.db.WriteRow(ctx, `UPDATE webhooks SET `+strings.Join(sets, ", ")+
		` WHERE id = $1 RETURNING `+webhookColumns, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return wh, errWebhookNotFound
	}
	return wh, sqldb.Err("update webhook", err)
}

// deleteWebhook removes a webhook and cancels its pending deliveries in one
// transaction.
func (s *store) deleteWebhook(ctx context.Context, owner, serviceID, wid string, now time.Time) error {
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM webhooks WHERE id = $1 AND service_id = $2
			AND service_id IN (SELECT id FROM services WHERE owner = $3)`, wid, serviceID, owner)
		if err != nil {
			return sqldb.Err("delete webhook", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errWebhookNotFound
		}
		_, err = tx.ExecContext(ctx, `UPDATE webhook_deliveries SET state = 'canceled', finished_at = $2,
			lease_token = NULL, lease_until = NULL WHERE webhook_id = $1 AND state = 'pending'`, wid, sqldb.Micros(now))
		return sqldb.Err("cancel deliveries", err)
	})
}

// Delivery is a delivery as its owner sees it (no URL, no secret).
type Delivery struct {
	ID             string     `json:"id"`
	EventType      string     `json:"event_type"`
	ClaimID        string     `json:"claim_id"`
	Status         string     `json:"status"`
	Attempts       int        `json:"attempts"`
	CreatedAt      time.Time  `json:"created_at"`
	NextAttemptAt  *time.Time `json:"next_attempt_at,omitempty"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
	LastStatusCode *int       `json:"last_status_code,omitempty"`
	LastError      string     `json:"last_error,omitempty"`
	AttemptLog     []Attempt  `json:"attempt_log"`
}

// Attempt is one attempt of a Delivery: StatusCode is nil when no
// response arrived.
type Attempt struct {
	Attempt    int       `json:"attempt"`
	At         time.Time `json:"at"`
	StatusCode *int      `json:"status_code,omitempty"`
	Error      string    `json:"error,omitempty"`
	DurationMS int64     `json:"duration_ms"`
}

// listDeliveries returns the newest deliveries of a webhook with their
// attempts.
func (s *store) listDeliveries(ctx context.Context, owner, serviceID, wid string, limit int) ([]Delivery, error) {
	if _, err := s.webhook(ctx, owner, serviceID, wid); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, event_type, claim_id, state, attempts, created_at, next_attempt_at,
			finished_at, last_status_code, last_error
		FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, wid, limit)
	if err != nil {
		return nil, sqldb.Err("list deliveries", err)
	}
	out := []Delivery{}
	index := map[string]int{}
	err = func() error {
		defer rows.Close()
		for rows.Next() {
			var (
				d             Delivery
				created, next int64
				finished      sql.NullInt64
				code          sql.NullInt64
				lastErr       sql.NullString
			)
			if err := rows.Scan(&d.ID, &d.EventType, &d.ClaimID, &d.Status, &d.Attempts, &created, &next, &finished, &code, &lastErr); err != nil {
				return sqldb.Err("scan delivery", err)
			}
			d.CreatedAt, d.FinishedAt, d.LastError = sqldb.FromMicros(created), timePtr(finished), lastErr.String
			if d.Status == deliveryPending {
				t := sqldb.FromMicros(next)
				d.NextAttemptAt = &t
			}
			if code.Valid {
				c := int(code.Int64)
				d.LastStatusCode = &c
			}
			d.AttemptLog = []Attempt{}
			index[d.ID] = len(out)
			out = append(out, d)
		}
		return sqldb.Err("list deliveries", rows.Err())
	}()
	if err != nil || len(out) == 0 {
		return out, err
	}
	rows, err = s.db.QueryContext(ctx, `SELECT a.delivery_id, a.attempt, a.at, a.status_code, a.error, a.duration_ms
		FROM webhook_attempts a WHERE a.delivery_id IN (SELECT id FROM webhook_deliveries WHERE webhook_id = $1
			ORDER BY created_at DESC, id DESC LIMIT $2) ORDER BY a.delivery_id, a.attempt`, wid, limit)
	if err != nil {
		return nil, sqldb.Err("list attempts", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id   string
			a    Attempt
			at   int64
			code sql.NullInt64
		)
		if err := rows.Scan(&id, &a.Attempt, &at, &code, &a.Error, &a.DurationMS); err != nil {
			return nil, sqldb.Err("scan attempt", err)
		}
		a.At = sqldb.FromMicros(at)
		if code.Valid {
			c := int(code.Int64)
			a.StatusCode = &c
		}
		if i, ok := index[id]; ok {
			out[i].AttemptLog = append(out[i].AttemptLog, a)
		}
	}
	return out, sqldb.Err("list attempts", rows.Err())
}

// delivery is a leased delivery: what the worker needs to send it.
type delivery struct {
	ID, WebhookID, URL, Secret string
	EventType                  string
	OccurredAt, CreatedAt      time.Time
	Claim                      claim
	Attempts                   int
	Owner                      string // of the webhook's service: its share of the slots
}

// claim is the claim of an event as the delivery's snapshot holds it.
type claim struct {
	ID, Namespace, Service, PublicKey, Subject, AgentID, AgentName, Status string
}

// deliveryWindow is how many of the oldest due deliveries a lease looks
// at, so that leasing costs the same whatever the backlog. The share per
// owner applies within it, so a burst of one owner's deliveries leaves
// room for the others' behind it. Yet an owner who keeps more than
// deliveryWindow deliveries due ahead of everyone else's still delays
// them. (Each of its attempts that fails moves its delivery to a later
// retry, out of the window.)
const deliveryWindow = 64

// claimDeliveries leases for leaseFor under token up to n of the oldest
// deliveryWindow due pending deliveries, oldest first. Of each owner (the
// owner of the delivery's service) it takes only as many as its share
// allows: share[owner] when listed, else perOwner. Rows leased by another worker
// (lease not expired) are skipped. The outer conditions re-check what the
// inner select saw: on PostgreSQL, a row another worker leased meanwhile
// is re-read after its lock. So a row is only ever leased by one worker at
// a time. Each delivery comes with its owner.
func (s *store) claimDeliveries(ctx context.Context, token string, n, perOwner int, share map[string]int, now time.Time, leaseFor time.Duration) ([]delivery, error) {
	args := []any{token, sqldb.Micros(now.Add(leaseFor)), sqldb.Micros(now), n, deliveryWindow, perOwner}
	// The casts type the parameters for PostgreSQL.
	allowed := "CAST($6 AS INTEGER)"
	if len(share) > 0 {
		var b strings.Builder
		b.WriteString("CASE tenant")
		for owner, left := range share {
			args = append(args, owner, left)
			fmt.Fprintf(&b, " WHEN CAST($%d AS TEXT) THEN CAST($%d AS INTEGER)", len(args)-1, len(args))
		}
		b.WriteString(" ELSE CAST($6 AS INTEGER) END")
		allowed = b.String()
	}
	rows, err := s.db.QueryContext(ctx, `UPDATE webhook_deliveries SET lease_token = $1, lease_until = $2
		WHERE id IN (SELECT id FROM (
				SELECT c.id, c.next_attempt_at, c.tenant,
					ROW_NUMBER() OVER (PARTITION BY c.tenant ORDER BY c.next_attempt_at, c.id) AS rank
				FROM (SELECT w.id, w.next_attempt_at, COALESCE(s.owner, w.service) AS tenant
					FROM (SELECT id, next_attempt_at, service FROM webhook_deliveries
						WHERE state = 'pending' AND next_attempt_at <= $3 AND (lease_until IS NULL OR lease_until <= $3)
						ORDER BY next_attempt_at LIMIT $5) w
					LEFT JOIN services s ON s.slug = w.service) c
			) due
			WHERE rank <= `+allowed+`
			ORDER BY next_attempt_at LIMIT $4)
			AND state = 'pending' AND (lease_until IS NULL OR lease_until <= $3)
		RETURNING id, webhook_id, url, secret, event_type, occurred_at, created_at, claim_id, namespace, service,
			public_key, subject, agent_id, agent_name, claim_status, attempts,
			COALESCE((SELECT owner FROM services WHERE slug = webhook_deliveries.service), service)`,
		args...)
	if err != nil {
		return nil, sqldb.Err("lease deliveries", err)
	}
	defer rows.Close()
	var out []delivery
	for rows.Next() {
		var (
			d                 delivery
			occurred, created int64
		)
		c := &d.Claim
		if err := rows.Scan(&d.ID, &d.WebhookID, &d.URL, &d.Secret, &d.EventType, &occurred, &created, &c.ID, &c.Namespace, &c.Service,
			&c.PublicKey, &c.Subject, &c.AgentID, &c.AgentName, &c.Status, &d.Attempts, &d.Owner); err != nil {
			return nil, sqldb.Err("scan delivery", err)
		}
		d.OccurredAt, d.CreatedAt = sqldb.FromMicros(occurred), sqldb.FromMicros(created)
		out = append(out, d)
	}
	return out, sqldb.Err("lease deliveries", rows.Err())
}

// currentTarget returns the URL and sealed secret of a webhook that still
// exists, so queued deliveries follow a URL change.
func (s *store) currentTarget(ctx context.Context, webhookID string) (url, sealed string, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT url, secret FROM webhooks WHERE id = $1`, webhookID).Scan(&url, &sealed)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", false, nil
	}
	return url, sealed, err == nil, sqldb.Err("webhook target", err)
}

// attemptOutcome is the result of one delivery attempt.
type attemptOutcome struct {
	At         time.Time
	StatusCode int // 0: no response
	Err        string
	Duration   time.Duration
	Delivered  bool
	// NextAt is when to retry; zero means the failure is terminal.
	NextAt time.Time
}

// finishAttempt records an attempt of a delivery leased under token and
// moves the delivery on (delivered, failed, or due again at NextAt). It is
// conditional on the lease: when the lease was lost, nothing is written
// and ok is false. A delivered row is never touched again, so each
// webhook-id succeeds at most once.
func (s *store) finishAttempt(ctx context.Context, id, token string, o attemptOutcome) (state string, ok bool, err error) {
	state = deliveryPending
	if o.Delivered {
		state = deliveryDelivered
	} else if o.NextAt.IsZero() {
		state = deliveryFailed
	}
	var finished sql.NullInt64
	next := o.NextAt
	if state != deliveryPending {
		finished, next = sqldb.NullMicros(o.At), o.At
	}
	code := sql.NullInt64{Int64: int64(o.StatusCode), Valid: o.StatusCode != 0}
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		var attempt int
		err := tx.QueryRowContext(ctx, `UPDATE webhook_deliveries SET state = $3, attempts = attempts + 1, next_attempt_at = $4,
				finished_at = $5, last_status_code = $6, last_error = $7, lease_token = NULL, lease_until = NULL
			WHERE id = $1 AND lease_token = $2 AND state = 'pending' RETURNING attempts`,
			id, token, state, sqldb.Micros(next), finished, code, o.Err).Scan(&attempt)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return sqldb.Err("finish delivery", err)
		}
		ok = true
		_, err = tx.ExecContext(ctx, `INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, error, duration_ms)
			VALUES ($1, $2, $3, $4, $5, $6)`, id, attempt, sqldb.Micros(o.At), code, o.Err, o.Duration.Milliseconds())
		return sqldb.Err("record attempt", err)
	})
	return state, ok, err
}

// releaseLease gives a leased delivery back untouched (the worker stopped
// before attempting it).
func (s *store) releaseLease(ctx context.Context, id, token string) error {
	_, err := s.db.Exec(ctx, `UPDATE webhook_deliveries SET lease_token = NULL, lease_until = NULL
		WHERE id = $1 AND lease_token = $2 AND state = 'pending'`, id, token)
	return sqldb.Err("release delivery", err)
}

// pruneDeliveries deletes finished deliveries (and their attempts) that
// finished before cutoff.
func (s *store) pruneDeliveries(ctx context.Context, cutoff time.Time) error {
	_, err := s.db.Exec(ctx, `DELETE FROM webhook_deliveries WHERE state <> 'pending' AND finished_at < $1`, sqldb.Micros(cutoff))
	return sqldb.Err("prune deliveries", err)
}

// serviceOwner returns the namespace owning the service with slug, and
// whether it exists.
func (s *store) serviceOwner(ctx context.Context, slug string) (string, bool, error) {
	var owner string
	err := s.db.QueryRowContext(ctx, `SELECT owner FROM services WHERE slug = $1`, slug).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return owner, err == nil, sqldb.Err("service owner", err)
}

// timePtr is a nullable time column as an optional time.
func timePtr(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := sqldb.FromMicros(v.Int64)
	return &t
}
