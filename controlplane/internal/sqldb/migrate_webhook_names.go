package sqldb

// webhookNamesMigration gives the webhook events their claim names
// (claim.submitted, claim.approved, claim.rejected, claim.revoked) beside
// the request.* names they had first, which stay aliases. The outbox
// triggers queue an event for every webhook of the claim's service
// subscribed to it by either name, under the name the webhook subscribed
// with: subscriptions stored before this migration hold request.* names
// and go on getting request.* events.
var webhookNamesMigration = migration{
	version: 13,
	name:    "webhooks: claim.* event names beside their request.* aliases",
	sqlite: []string{
		`DROP TRIGGER claims_webhook_submitted`,
		`DROP TRIGGER claims_webhook_moved`,
		`CREATE TRIGGER claims_webhook_submitted AFTER INSERT ON claims WHEN NEW.status = 'pending' BEGIN
			` + namedOutboxInsert("'msg_' || lower(hex(randomblob(16)))", "'submitted'") + `;
		END`,
		`CREATE TRIGGER claims_webhook_moved AFTER UPDATE OF status ON claims
			WHEN (OLD.status = 'pending' AND NEW.status IN ('approved', 'rejected'))
			  OR (OLD.status = 'approved' AND NEW.status = 'revoked') BEGIN
			` + namedOutboxInsert("'msg_' || lower(hex(randomblob(16)))", "NEW.status") + `;
		END`,
	},
	postgres: []string{
		`CREATE OR REPLACE FUNCTION claims_webhook_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE
			what TEXT;
		BEGIN
			IF TG_OP = 'INSERT' THEN
				IF NEW.status <> 'pending' THEN RETURN NULL; END IF;
				what := 'submitted';
			ELSIF (OLD.status = 'pending' AND NEW.status IN ('approved', 'rejected'))
			   OR (OLD.status = 'approved' AND NEW.status = 'revoked') THEN
				what := NEW.status;
			ELSE
				RETURN NULL;
			END IF;
			` + namedOutboxInsert("'msg_' || replace(gen_random_uuid()::text, '-', '')", "what") + `;
			RETURN NULL;
		END $$`,
	},
}

// namedOutboxInsert is outboxInsert for an event whose name ends in what
// (an SQL expression: 'submitted', 'approved', …): each webhook subscribed
// to claim.<what> or request.<what> gets one delivery, typed by the name
// it subscribed with (claim.<what> when it holds both, which the API
// refuses).
func namedOutboxInsert(id, what string) string {
	claim, request := `('claim.' || `+what+`)`, `('request.' || `+what+`)`
	return `INSERT INTO webhook_deliveries (id, webhook_id, url, secret, event_type, occurred_at,
			claim_id, namespace, service, public_key, subject, agent_id, agent_name, claim_status,
			state, attempts, next_attempt_at, created_at)
		SELECT ` + id + `, w.id, w.url, w.secret,
			CASE WHEN w.events LIKE ('%,' || ` + claim + ` || ',%') THEN ` + claim + ` ELSE ` + request + ` END, NEW.updated_at,
			NEW.id, NEW.namespace, NEW.service, NEW.public_key, NEW.subject, NEW.agent_id, NEW.agent_name, NEW.status,
			'pending', 0, NEW.updated_at, NEW.updated_at
		FROM webhooks w JOIN services s ON s.id = w.service_id
		WHERE s.slug = NEW.service
		  AND (w.events LIKE ('%,' || ` + claim + ` || ',%') OR w.events LIKE ('%,' || ` + request + ` || ',%'))`
}
