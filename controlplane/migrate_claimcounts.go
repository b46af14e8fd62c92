package controlplane

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
	version: 10,
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
	},
}
