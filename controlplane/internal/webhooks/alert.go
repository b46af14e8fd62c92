package webhooks

import (
	"context"
	"fmt"

	"github.com/idnhq/idn/controlplane/internal/web"
)

// alertFailure e-mails the terminal failure of d to the service owner and
// the operator copies, when the owner wants such alerts (the copies alone
// when the owner is gone). Failures to send are logged.
func (m *Manager) alertFailure(ctx context.Context, d delivery, attempts int, o attemptOutcome) {
	a := m.cfg.Alert
	if !a.Enabled() {
		return
	}
	owner, ok, err := m.store.serviceOwner(ctx, d.Claim.Service)
	if err != nil {
		m.kit.Log.ErrorContext(ctx, "webhook alert: owner lookup failed", "err", err)
		return
	}
	var ownerAddr string
	if ok && m.alertTo != nil {
		addr, wanted, err := m.alertTo(ctx, owner)
		switch {
		case err != nil:
			m.kit.Log.ErrorContext(ctx, "webhook alert: owner setting lookup failed", "err", err)
			return
		case !wanted:
			return
		}
		ownerAddr = addr
	}
	if owner == "" {
		owner = "(deleted)"
	}
	// The URL is left out on purpose: it may carry secrets.
	subject := "idn: webhook delivery failed for service " + d.Claim.Service
	body := fmt.Sprintf("A webhook delivery failed after %d attempts and will not be retried.\r\n\r\n"+
		"Namespace owner: %s\r\nService: %s\r\nWebhook: %s\r\nDelivery (webhook-id): %s\r\nEvent: %s for claim %s\r\n"+
		"Last error: %s\r\nFailed at: %s\r\n",
		attempts, owner, d.Claim.Service, d.WebhookID, d.ID, d.EventType, d.Claim.ID, o.Err, web.Timestamp(o.At))
	a.Notify(ctx, m.kit.Log, m.kit.Now(), ownerAddr, true, subject, body, "delivery_id", d.ID)
}
