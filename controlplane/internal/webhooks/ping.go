package webhooks

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
)

// testWebhook is POST /v1/services/{id}/webhooks/{wid}/test: it queues one
// test delivery to the webhook, whatever events it subscribes to, and
// answers 202 with the delivery's id. The delivery goes through the same
// queue, signature, target checks and retries as claim events, so its
// outcome appears in the webhook's deliveries. The delivery queue is
// shared by every owner, so a webhook holds one pending test delivery at
// most: another is 429 RATE_LIMITED until it is delivered or given up.
func (m *Manager) testWebhook(w http.ResponseWriter, r *http.Request, owner string) {
	id, err := m.store.queueTestDelivery(r.Context(), owner, r.PathValue("id"), r.PathValue("wid"), m.kit.Now())
	if errors.Is(err, errTestQueued) {
		apierror.Write(w, r, web.RateLimited(m.cfg.Timeout))
		return
	}
	if err != nil {
		m.error(w, r, err)
		return
	}
	m.Wake()
	apierror.WriteJSON(w, http.StatusAccepted, map[string]string{"delivery_id": id, "event_type": EventTest})
}

// errTestQueued refuses a test delivery while the webhook has one pending.
var errTestQueued = errors.New("webhooks: a test delivery of the webhook is already queued")

// queueTestDelivery writes a pending webhook.test delivery of webhook wid
// of owner's service serviceID, with the same snapshot of URL and sealed
// secret that the claim triggers take, unless one is pending already
// (errTestQueued).
func (s *store) queueTestDelivery(ctx context.Context, owner, serviceID, wid string, now time.Time) (string, error) {
	id := newID("msg_")
	lock := ""
	if s.db.PG() {
		lock = " FOR UPDATE OF w" // serialises the count and insert per webhook
	}
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT w.id FROM webhooks w JOIN services s ON s.id = w.service_id
			WHERE w.id = $1 AND w.service_id = $2 AND s.owner = $3`+lock, wid, serviceID, owner).Scan(new(string))
		if errors.Is(err, sql.ErrNoRows) {
			return errWebhookNotFound
		}
		if err != nil {
			return sqldb.Err("webhook", err)
		}
		var queued int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_deliveries WHERE webhook_id = $1 AND event_type = $2 AND state = 'pending'`,
			wid, EventTest).Scan(&queued); err != nil {
			return sqldb.Err("count test deliveries", err)
		}
		if queued > 0 {
			return errTestQueued
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, url, secret, event_type, occurred_at,
				claim_id, namespace, service, public_key, subject, agent_id, agent_name, claim_status,
				state, attempts, next_attempt_at, created_at)
			SELECT $1, w.id, w.url, w.secret, $2, $3, '', s.owner, s.slug, '', '', '', '', '', 'pending', 0, $3, $3
			FROM webhooks w JOIN services s ON s.id = w.service_id WHERE w.id = $4`,
			id, EventTest, sqldb.Micros(now), wid)
		return sqldb.Err("queue test delivery", err)
	})
	return id, err
}
