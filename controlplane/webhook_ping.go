package controlplane

import (
	"context"
	"net/http"
	"time"

	"github.com/idnhq/idn/internal/apierror"
)

// EventWebhookTest is the event type of a test delivery, sent on the
// owner's request (POST /v1/services/{id}/webhooks/{wid}/test) so a
// receiver can be checked without changing a claim. Its data carries the
// namespace and service; the claim fields are empty.
const EventWebhookTest = "webhook.test"

// testWebhook is POST /v1/services/{id}/webhooks/{wid}/test: it queues one
// test delivery to the webhook, whatever events it subscribes to, and
// answers 202 with the delivery's id. The delivery goes through the same
// queue, signature, target checks and retries as claim events, so its
// outcome appears in the webhook's deliveries.
func (s *Server) testWebhook(w http.ResponseWriter, r *http.Request, owner string) {
	id, err := s.store.queueTestDelivery(r.Context(), owner, r.PathValue("id"), r.PathValue("wid"), s.now())
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	s.wakeWorkers()
	apierror.WriteJSON(w, http.StatusAccepted, map[string]string{"delivery_id": id, "event_type": EventWebhookTest})
}

// queueTestDelivery writes a pending webhook.test delivery of webhook wid
// of owner's service serviceID, with the same snapshot of URL and sealed
// secret that the claim triggers take.
func (s *Store) queueTestDelivery(ctx context.Context, owner, serviceID, wid string, now time.Time) (string, error) {
	id := newID("msg_")
	res, err := s.db.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, url, secret, event_type, occurred_at,
			claim_id, namespace, service, public_key, subject, agent_id, agent_name, claim_status,
			state, attempts, next_attempt_at, created_at)
		SELECT $1, w.id, w.url, w.secret, $2, $3, '', s.owner, s.slug, '', '', '', '', '', 'pending', 0, $3, $3
		FROM webhooks w JOIN services s ON s.id = w.service_id
		WHERE w.id = $4 AND w.service_id = $5 AND s.owner = $6`,
		id, EventWebhookTest, micros(now), wid, serviceID, owner)
	if err != nil {
		return "", dbErr("queue test delivery", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return "", errWebhookNotFound
	}
	return id, nil
}
