package webhooks

import (
	"context"
	"time"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
)

// QueueAction queues an action.requested delivery of action id for every
// webhook of owner's service slug subscribed to it. The delivery's claim
// fields carry the action id and the agent; the arguments never enter it.
func (m *Manager) QueueAction(ctx context.Context, owner, slug, id, agentNS, agentKey, agentName, subject string, at time.Time) error {
	now := sqldb.Micros(at)
	q := `INSERT INTO webhook_deliveries (id, webhook_id, url, secret, event_type, occurred_at,
			claim_id, namespace, service, public_key, subject, agent_id, agent_name, claim_status,
			state, attempts, next_attempt_at, created_at)
		SELECT ` + m.deliveryID() + `, w.id, w.url, w.secret, $1, $2, $3, $4, s.slug, $5, $6, '', $7, 'pending', 'pending', 0, $2, $2
		FROM webhooks w JOIN services s ON s.id = w.service_id
		WHERE s.slug = $8 AND s.owner = $9 AND w.events LIKE $10`
	_, err := m.store.db.Exec(ctx, q, ActionRequested, now, id, agentNS, agentKey, subject, agentName, slug, owner, "%,"+ActionRequested+",%")
	return sqldb.Err("queue action.requested", err)
}

// deliveryID is the SQL expression of a fresh delivery id.
func (m *Manager) deliveryID() string {
	if m.store.db.PG() {
		return `'msg_' || replace(gen_random_uuid()::text, '-', '')`
	}
	return `'msg_' || lower(hex(randomblob(16)))`
}
