package webhooks

import (
	"context"
	"fmt"
	"time"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
)

// ReconnectRequired tells owner that the account of subject ("" for the
// connection's one account) on connection of gateway gatewayID needs
// reconnecting: a connection.reconnect_required delivery to the webhooks
// of service slug subscribed to it, and an alert e-mail when alert mail
// is configured and the owner wants alerts. The e-mail is sent in the
// background, so a slow mail server never holds the gateway's report.
// The caller tells each refusal once.
func (m *Manager) ReconnectRequired(ctx context.Context, owner, slug, gatewayID, connection, subject string, at time.Time) error {
	if err := m.queueReconnect(ctx, owner, slug, gatewayID, connection, subject, at); err != nil {
		return err
	}
	if m.cfg.Alert.Enabled() {
		go m.alertReconnect(context.WithoutCancel(ctx), owner, gatewayID, connection, subject, at)
	}
	return nil
}

// queueReconnect queues a connection.reconnect_required delivery for
// every webhook of owner's service slug subscribed to it. The delivery's
// claim fields carry the connection (claim_id), the owner (namespace) and
// the gateway (public_key).
func (m *Manager) queueReconnect(ctx context.Context, owner, slug, gatewayID, connection, subject string, at time.Time) error {
	now := sqldb.Micros(at)
	q := `INSERT INTO webhook_deliveries (id, webhook_id, url, secret, event_type, occurred_at,
			claim_id, namespace, service, public_key, subject, agent_id, agent_name, claim_status,
			state, attempts, next_attempt_at, created_at)
		SELECT ` + m.deliveryID() + `, w.id, w.url, w.secret, $1, $2, $3, $4, s.slug, $5, $6, '', '', 'needs_reconnecting', 'pending', 0, $2, $2
		FROM webhooks w JOIN services s ON s.id = w.service_id
		WHERE s.slug = $7 AND s.owner = $4 AND w.events LIKE $8`
	_, err := m.store.db.Exec(ctx, q, ConnectionReconnectRequired, now, connection, owner, gatewayID, subject, slug,
		"%,"+ConnectionReconnectRequired+",%")
	return sqldb.Err("queue connection.reconnect_required", err)
}

// alertReconnect e-mails the owner, when they want alerts, that an
// account needs reconnecting. It names no token. Failures are logged.
func (m *Manager) alertReconnect(ctx context.Context, owner, gatewayID, connection, subject string, at time.Time) {
	a := m.cfg.Alert
	if !a.Enabled() || m.alertTo == nil {
		return
	}
	addr, wanted, err := m.alertTo(ctx, owner)
	switch {
	case err != nil:
		m.kit.Log.ErrorContext(ctx, "reconnect alert: owner setting lookup failed", "err", err)
		return
	case !wanted || addr == "":
		return
	}
	who := "its account"
	if subject != "" {
		who = fmt.Sprintf("the account of subject %q", subject)
	}
	body := fmt.Sprintf("The provider refused the refresh token of %s on connection %s of gateway %s.\r\n"+
		"Agents using it are refused (UPSTREAM_AUTH_REQUIRED) until you connect it again: Reconnect on the gateway's page "+
		"of the dashboard, or gateway connect on its host.\r\n\r\nNamespace owner: %s\r\nRefused at: %s\r\n",
		who, connection, gatewayID, owner, web.Timestamp(at))
	a.Notify(ctx, m.kit.Log, m.kit.Now(), addr, false, "idn: connection "+connection+" needs reconnecting", body, "gateway", gatewayID)
}
