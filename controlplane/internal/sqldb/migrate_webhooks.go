package sqldb

// webhookMigration holds the webhook and registry tables (issue 7).
//
// The webhook outbox is written by triggers on claims, inside the very
// transaction that changes a claim, whatever code path made the change
// (owner moves, service deletion, account deletion): one delivery row per
// subscribed webhook of the claim's service. A delivery keeps a snapshot of
// its webhook's URL and encrypted secret and has no foreign key to it, so
// the events of a deletion that also removes the service's webhooks (service
// or account deletion) are still sent.
//
// Registry writes need no outbox: the claim row itself says what the
// registry still lacks (an approved claim without approval_tx_hash, a
// revoked claim with approval_tx_hash but no revocation_tx_hash), and
// registry_jobs keeps only the attempts and leases of that work.
var webhookMigration = migration{
	version: 4,
	name:    "webhooks: endpoints, outbox, deliveries; registry queue",
	stmts: []string{
		`CREATE TABLE webhooks (
			id TEXT PRIMARY KEY,
			service_id TEXT NOT NULL REFERENCES services(id) ON DELETE CASCADE,
			url TEXT NOT NULL,
			events TEXT NOT NULL,
			secret TEXT NOT NULL,
			created_at BIGINT NOT NULL,
			updated_at BIGINT NOT NULL
		)`,
		`CREATE INDEX webhooks_service ON webhooks(service_id)`,
		// id is the webhook-id header: stable across the attempts of one
		// delivery, so receivers can deduplicate.
		`CREATE TABLE webhook_deliveries (
			id TEXT PRIMARY KEY,
			webhook_id TEXT NOT NULL,
			url TEXT NOT NULL,
			secret TEXT NOT NULL,
			event_type TEXT NOT NULL,
			occurred_at BIGINT NOT NULL,
			claim_id TEXT NOT NULL,
			namespace TEXT NOT NULL,
			service TEXT NOT NULL,
			public_key TEXT NOT NULL,
			subject TEXT NOT NULL,
			agent_id TEXT NOT NULL,
			agent_name TEXT NOT NULL,
			claim_status TEXT NOT NULL,
			state TEXT NOT NULL,
			attempts INTEGER NOT NULL,
			next_attempt_at BIGINT NOT NULL,
			lease_token TEXT,
			lease_until BIGINT,
			last_status_code INTEGER,
			last_error TEXT,
			finished_at BIGINT,
			created_at BIGINT NOT NULL
		)`,
		`CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at) WHERE state = 'pending'`,
		`CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries(webhook_id, created_at)`,
		`CREATE INDEX webhook_deliveries_finished ON webhook_deliveries(finished_at) WHERE state <> 'pending'`,
		`CREATE TABLE webhook_attempts (
			delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
			attempt INTEGER NOT NULL,
			at BIGINT NOT NULL,
			status_code INTEGER,
			error TEXT NOT NULL,
			duration_ms BIGINT NOT NULL,
			PRIMARY KEY (delivery_id, attempt)
		)`,
		`CREATE TABLE registry_jobs (
			claim_id TEXT NOT NULL,
			op TEXT NOT NULL,
			attempts INTEGER NOT NULL,
			next_attempt_at BIGINT NOT NULL,
			lease_token TEXT,
			lease_until BIGINT,
			last_error TEXT,
			failed_at BIGINT,
			PRIMARY KEY (claim_id, op)
		)`,
		// The registry's to-do list, read by the queue worker.
		`CREATE INDEX claims_registry_todo ON claims(updated_at)
			WHERE (status = 'approved' AND approval_tx_hash IS NULL)
			   OR (status = 'revoked' AND approval_tx_hash IS NOT NULL AND revocation_tx_hash IS NULL)`,
	},
	sqlite: []string{
		`CREATE TRIGGER claims_webhook_submitted AFTER INSERT ON claims WHEN NEW.status = 'pending' BEGIN
			` + sqliteOutboxInsert("'request.submitted'") + `;
		END`,
		`CREATE TRIGGER claims_webhook_moved AFTER UPDATE OF status ON claims
			WHEN (OLD.status = 'pending' AND NEW.status IN ('approved', 'rejected'))
			  OR (OLD.status = 'approved' AND NEW.status = 'revoked') BEGIN
			` + sqliteOutboxInsert("'request.' || NEW.status") + `;
		END`,
	},
	postgres: []string{
		`CREATE FUNCTION claims_webhook_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE
			typ TEXT;
		BEGIN
			IF TG_OP = 'INSERT' THEN
				IF NEW.status <> 'pending' THEN RETURN NULL; END IF;
				typ := 'request.submitted';
			ELSIF (OLD.status = 'pending' AND NEW.status IN ('approved', 'rejected'))
			   OR (OLD.status = 'approved' AND NEW.status = 'revoked') THEN
				typ := 'request.' || NEW.status;
			ELSE
				RETURN NULL;
			END IF;
			` + outboxInsert("'msg_' || replace(gen_random_uuid()::text, '-', '')", "typ") + `;
			RETURN NULL;
		END $$`,
		`CREATE TRIGGER claims_webhook_outbox AFTER INSERT OR UPDATE OF status ON claims
			FOR EACH ROW EXECUTE FUNCTION claims_webhook_outbox()`,
	},
}

func sqliteOutboxInsert(typ string) string {
	return outboxInsert("'msg_' || lower(hex(randomblob(16)))", typ)
}

// outboxInsert is the trigger statement that queues one delivery of the
// claim NEW per webhook of its service subscribed to the event type typ
// (an SQL expression). Webhook events are stored as ",a,b,".
func outboxInsert(id, typ string) string {
	return `INSERT INTO webhook_deliveries (id, webhook_id, url, secret, event_type, occurred_at,
			claim_id, namespace, service, public_key, subject, agent_id, agent_name, claim_status,
			state, attempts, next_attempt_at, created_at)
		SELECT ` + id + `, w.id, w.url, w.secret, ` + typ + `, NEW.updated_at,
			NEW.id, NEW.namespace, NEW.service, NEW.public_key, NEW.subject, NEW.agent_id, NEW.agent_name, NEW.status,
			'pending', 0, NEW.updated_at, NEW.updated_at
		FROM webhooks w JOIN services s ON s.id = w.service_id
		WHERE s.slug = NEW.service AND w.events LIKE ('%,' || ` + typ + ` || ',%')`
}
