package sqldb

// rejectedTupleMigration makes a rejection final, as a revocation is. The
// index of the revoked claims by tuple becomes one of the final claims
// (revoked or rejected), so a submission of a tuple the owner turned down
// finds that claim with one index probe and files nothing. A rejection is
// also recorded in the feed's change log (op 'reject'), so a gateway
// waiting for changes learns it at once and answers the agent
// AUTH_CLAIM_REJECTED instead of "pending". It changes no approved count.
var rejectedTupleMigration = migration{
	version: 20,
	name:    "rejected tuples: final claims indexed by tuple, rejections in the feed's change log",
	stmts: []string{
		`DROP INDEX claims_revoked_tuple`,
		`CREATE INDEX claims_final_tuple ON claims(namespace, public_key, service) WHERE status IN ('revoked', 'rejected')`,
	},
	sqlite: []string{
		`CREATE TRIGGER claims_feed_reject AFTER UPDATE OF status ON claims
			WHEN OLD.status = 'pending' AND NEW.status = 'rejected' BEGIN
			INSERT INTO feed_state (service, approved, version) VALUES (NEW.service, 0, 1)
			ON CONFLICT (service) DO UPDATE SET version = version + 1;
			INSERT INTO feed_changes (service, seq, claim_id, namespace, public_key, op, changed_at)
				SELECT service, version, NEW.id, NEW.namespace, NEW.public_key, 'reject', NEW.updated_at
				FROM feed_state WHERE service = NEW.service;
		END`,
	},
	postgres: []string{
		`CREATE FUNCTION claims_feed_reject() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE
			seq BIGINT;
		BEGIN
			INSERT INTO feed_state (service, approved, version) VALUES (NEW.service, 0, 1)
			ON CONFLICT (service) DO UPDATE SET version = feed_state.version + 1
			RETURNING version INTO seq;
			INSERT INTO feed_changes (service, seq, claim_id, namespace, public_key, op, changed_at)
				VALUES (NEW.service, seq, NEW.id, NEW.namespace, NEW.public_key, 'reject', NEW.updated_at);
			RETURN NULL;
		END $$`,
		`CREATE TRIGGER claims_feed_reject AFTER UPDATE OF status ON claims
			FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status = 'rejected') EXECUTE FUNCTION claims_feed_reject()`,
	},
}
