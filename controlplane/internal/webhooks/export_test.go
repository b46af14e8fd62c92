package webhooks

import (
	"context"
	"time"
)

// Sign is sign, for the signature vector.
var Sign = sign

// OpenSecret is openSecret.
func (m *Manager) OpenSecret(webhookID, sealed string) (string, error) {
	return m.openSecret(webhookID, sealed)
}

// NextAttempt is nextAttempt.
func (m *Manager) NextAttempt(failed int, created, now time.Time) time.Time {
	return m.nextAttempt(failed, created, now)
}

// Lease leases the due deliveries under token at now, as a worker does,
// and returns their ids.
func (m *Manager) Lease(ctx context.Context, token string, now time.Time) ([]string, error) {
	ds, err := m.store.claimDeliveries(ctx, token, Slots, SlotsPerOwner, nil, now, 5*time.Minute)
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.ID)
	}
	return ids, err
}

// FinishDelivered records a successful attempt of delivery id under token,
// as a worker does, and reports whether it was recorded.
func (m *Manager) FinishDelivered(ctx context.Context, id, token string, at time.Time) (bool, error) {
	_, ok, err := m.store.finishAttempt(ctx, id, token, attemptOutcome{At: at, Delivered: true})
	return ok, err
}
