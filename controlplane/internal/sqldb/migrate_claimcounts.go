package sqldb

// claimCountsMigration keeps the numbers that grew with a namespace as
// counters, so reading them costs the same at ten claims or a million:
//
//   - claim_counts: claims per namespace, service and status. The claims
//     page's tab counts and service filter, the JSON listing's total and
//     the pending budget of a namespace and service read it.
//   - pending_agents: pending claims per namespace, service and agent
//     network (agent_net), the per-agent share of the pending budget.
//
// Triggers update both in the transaction of every insert, status change
// and delete of a claim, whichever statement makes it, so the counters
// never drift from the rows. A submission locks its namespace before it
// reads them, which keeps the budget exact under concurrency.
//
// The claims listings page by keyset ((created_at, id) after a cursor
// claim) on indexes that end in id, so any page is one index range. They
// replace claims_owner and claims_owner_service, whose prefixes they keep.
var claimCountsMigration = migration{
	version: 11,
	name:    "claims: counts per status and pending per agent network kept by triggers; keyset indexes",
	stmts: []string{
		`CREATE TABLE claim_counts (
			namespace TEXT NOT NULL,
			service TEXT NOT NULL,
			status TEXT NOT NULL,
			n BIGINT NOT NULL,
			PRIMARY KEY (namespace, service, status)
		)`,
		`INSERT INTO claim_counts (namespace, service, status, n)
			SELECT namespace, service, status, COUNT(*) FROM claims GROUP BY namespace, service, status`,
		`CREATE TABLE pending_agents (
			namespace TEXT NOT NULL,
			service TEXT NOT NULL,
			agent_net TEXT NOT NULL,
			n BIGINT NOT NULL,
			PRIMARY KEY (namespace, service, agent_net)
		)`,
		`INSERT INTO pending_agents (namespace, service, agent_net, n)
			SELECT namespace, service, agent_net, COUNT(*) FROM claims WHERE status = 'pending'
			GROUP BY namespace, service, agent_net`,
		`DROP INDEX claims_owner`,
		`DROP INDEX claims_owner_service`,
		`CREATE INDEX claims_owner_page ON claims(namespace, status, created_at, id)`,
		`CREATE INDEX claims_owner_service_page ON claims(namespace, service, status, created_at, id)`,
		`CREATE INDEX claims_namespace_page ON claims(namespace, created_at, id)`,
		`CREATE INDEX claims_namespace_service_page ON claims(namespace, service, created_at, id)`,
	},
	sqlite: []string{
		`CREATE TRIGGER claims_counts_insert AFTER INSERT ON claims BEGIN
			INSERT INTO claim_counts (namespace, service, status, n) VALUES (NEW.namespace, NEW.service, NEW.status, 1)
			ON CONFLICT (namespace, service, status) DO UPDATE SET n = n + 1;
			INSERT INTO pending_agents (namespace, service, agent_net, n)
				SELECT NEW.namespace, NEW.service, NEW.agent_net, 1 WHERE NEW.status = 'pending'
			ON CONFLICT (namespace, service, agent_net) DO UPDATE SET n = n + 1;
		END`,
		`CREATE TRIGGER claims_counts_update AFTER UPDATE OF status ON claims WHEN OLD.status <> NEW.status BEGIN
			UPDATE claim_counts SET n = n - 1 WHERE namespace = OLD.namespace AND service = OLD.service AND status = OLD.status;
			INSERT INTO claim_counts (namespace, service, status, n) VALUES (NEW.namespace, NEW.service, NEW.status, 1)
			ON CONFLICT (namespace, service, status) DO UPDATE SET n = n + 1;
			UPDATE pending_agents SET n = n - 1
				WHERE OLD.status = 'pending' AND namespace = OLD.namespace AND service = OLD.service AND agent_net = OLD.agent_net;
			INSERT INTO pending_agents (namespace, service, agent_net, n)
				SELECT NEW.namespace, NEW.service, NEW.agent_net, 1 WHERE NEW.status = 'pending'
			ON CONFLICT (namespace, service, agent_net) DO UPDATE SET n = n + 1;
		END`,
		`CREATE TRIGGER claims_counts_delete AFTER DELETE ON claims BEGIN
			UPDATE claim_counts SET n = n - 1 WHERE namespace = OLD.namespace AND service = OLD.service AND status = OLD.status;
			UPDATE pending_agents SET n = n - 1
				WHERE OLD.status = 'pending' AND namespace = OLD.namespace AND service = OLD.service AND agent_net = OLD.agent_net;
		END`,
	},
	postgres: []string{
		`CREATE FUNCTION claims_counts() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF TG_OP = 'UPDATE' AND OLD.status = NEW.status THEN
				RETURN NULL;
			END IF;
			IF TG_OP <> 'INSERT' THEN
				UPDATE claim_counts SET n = n - 1 WHERE namespace = OLD.namespace AND service = OLD.service AND status = OLD.status;
				IF OLD.status = 'pending' THEN
					UPDATE pending_agents SET n = n - 1
						WHERE namespace = OLD.namespace AND service = OLD.service AND agent_net = OLD.agent_net;
				END IF;
			END IF;
			IF TG_OP <> 'DELETE' THEN
				INSERT INTO claim_counts (namespace, service, status, n) VALUES (NEW.namespace, NEW.service, NEW.status, 1)
				ON CONFLICT (namespace, service, status) DO UPDATE SET n = claim_counts.n + 1;
				IF NEW.status = 'pending' THEN
					INSERT INTO pending_agents (namespace, service, agent_net, n) VALUES (NEW.namespace, NEW.service, NEW.agent_net, 1)
					ON CONFLICT (namespace, service, agent_net) DO UPDATE SET n = pending_agents.n + 1;
				END IF;
			END IF;
			RETURN NULL;
		END $$`,
		`CREATE TRIGGER claims_counts AFTER INSERT OR DELETE OR UPDATE OF status ON claims
			FOR EACH ROW EXECUTE FUNCTION claims_counts()`,
		// A claim submission in one round trip (Store.submitClaim has the
		// same steps for SQLite): the namespace row stays locked for the
		// function's few index lookups, not for a client's round trips, so
		// concurrent submitters to one namespace queue briefly.
		`CREATE FUNCTION claims_submit(p_id TEXT, p_namespace TEXT, p_key TEXT, p_service TEXT, p_ip TEXT, p_net TEXT,
			p_subject TEXT, p_agent_id TEXT, p_agent_name TEXT, p_now BIGINT, p_cutoff BIGINT, p_per_service BIGINT, p_per_agent BIGINT)
		RETURNS TABLE (outcome TEXT, claim TEXT) LANGUAGE plpgsql AS $$
		DECLARE
			deactivated BIGINT;
			live TEXT;
			pending BIGINT;
			from_agent BIGINT;
		BEGIN
			SELECT ns.deactivated_at INTO deactivated FROM namespaces ns WHERE ns.namespace = p_namespace FOR UPDATE;
			IF NOT FOUND THEN
				RETURN QUERY SELECT 'namespace_not_found', NULL::TEXT;
				RETURN;
			END IF;
			IF deactivated IS NOT NULL THEN
				RETURN QUERY SELECT 'namespace_deactivated', NULL::TEXT;
				RETURN;
			END IF;
			UPDATE claims c SET status = 'expired', expired_at = p_now, updated_at = p_now
				WHERE c.namespace = p_namespace AND c.service = p_service AND c.status = 'pending' AND c.created_at <= p_cutoff;
			SELECT c.id INTO live FROM claims c
				WHERE c.namespace = p_namespace AND c.public_key = p_key AND c.service = p_service AND c.status IN ('pending', 'approved');
			IF FOUND THEN
				RETURN QUERY SELECT 'live', live;
				RETURN;
			END IF;
			SELECT COALESCE((SELECT cc.n FROM claim_counts cc WHERE cc.namespace = p_namespace AND cc.service = p_service AND cc.status = 'pending'), 0),
				COALESCE((SELECT pa.n FROM pending_agents pa WHERE pa.namespace = p_namespace AND pa.service = p_service AND pa.agent_net = p_net), 0)
				INTO pending, from_agent;
			IF pending >= p_per_service THEN
				RETURN QUERY SELECT 'pending_limit', NULL::TEXT;
				RETURN;
			END IF;
			IF from_agent >= p_per_agent THEN
				RETURN QUERY SELECT 'agent_pending_limit', NULL::TEXT;
				RETURN;
			END IF;
			INSERT INTO claims (id, namespace, public_key, service, agent_ip, agent_net, subject, agent_id, agent_name, status, created_at, updated_at)
				VALUES (p_id, p_namespace, p_key, p_service, p_ip, p_net, p_subject, p_agent_id, p_agent_name, 'pending', p_now, p_now);
			RETURN QUERY SELECT 'created', p_id;
		END $$`,
	},
}
