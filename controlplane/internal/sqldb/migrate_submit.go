package sqldb

// SubmitRefused is the SQLSTATE with which claims_submit refuses a claim
// after inserting it (see submitConcurrencyMigration); the error's message
// is the refusal, as the function's outcome column would have named it.
const SubmitRefused = "IDN01"

// submitConcurrencyMigration lets the submissions of one namespace run side
// by side on PostgreSQL. claims_submit (migration 11) locked the namespace
// row FOR UPDATE before anything else and held it to commit. So every
// submission of a namespace queued behind every other for its whole
// transaction: the claim's insert and its indexes, the triggers and the
// commit's WAL flush. 32 at once waited up to 31 of those.
//
// Now the namespace row is locked FOR SHARE. Submissions share that lock,
// and a deactivation (an UPDATE of the row) still waits for it.
//
// The pending budget is enforced by the counters themselves. The insert's
// trigger increments the claim_counts row of the namespace and service and
// the pending_agents row of the agent network, holding both rows until
// commit. The function then reads them. A row is incremented by one
// transaction at a time, so every other submission that incremented them
// has committed by then and is counted. A count over its budget refuses
// exactly as the check before the insert would have under the namespace
// lock. It raises SubmitRefused, which rolls the claim and its webhook
// deliveries back. The check before the insert stays, so a flood that is
// over budget is refused without writing. Submissions of one service
// still queue, but only from the counter update to commit.
//
// Two submissions of one tuple no longer queue on the namespace row
// either. The second one's insert waits on the unique live-tuple index for
// the first and then inserts nothing (ON CONFLICT DO NOTHING). The
// function answers the claim the first one committed.
var submitConcurrencyMigration = migration{
	version: 14,
	name:    "claims: submissions of one namespace share its row; the pending budget is held by the counters",
	postgres: []string{
		`CREATE OR REPLACE FUNCTION claims_submit(p_id TEXT, p_namespace TEXT, p_key TEXT, p_service TEXT, p_ip TEXT, p_net TEXT,
			p_subject TEXT, p_agent_id TEXT, p_agent_name TEXT, p_now BIGINT, p_cutoff BIGINT, p_per_service BIGINT, p_per_agent BIGINT)
		RETURNS TABLE (outcome TEXT, claim TEXT) LANGUAGE plpgsql AS $$
		DECLARE
			deactivated BIGINT;
			live TEXT;
			pending BIGINT;
			from_agent BIGINT;
		BEGIN
			SELECT ns.deactivated_at INTO deactivated FROM namespaces ns WHERE ns.namespace = p_namespace FOR SHARE;
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
			FOR attempt IN 1..3 LOOP
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
					VALUES (p_id, p_namespace, p_key, p_service, p_ip, p_net, p_subject, p_agent_id, p_agent_name, 'pending', p_now, p_now)
					ON CONFLICT (namespace, public_key, service) WHERE status IN ('pending', 'approved') DO NOTHING;
				IF FOUND THEN
					SELECT (SELECT cc.n FROM claim_counts cc WHERE cc.namespace = p_namespace AND cc.service = p_service AND cc.status = 'pending'),
						(SELECT pa.n FROM pending_agents pa WHERE pa.namespace = p_namespace AND pa.service = p_service AND pa.agent_net = p_net)
						INTO pending, from_agent;
					IF pending > p_per_service THEN
						RAISE EXCEPTION USING ERRCODE = '` + SubmitRefused + `', MESSAGE = 'pending_limit';
					END IF;
					IF from_agent > p_per_agent THEN
						RAISE EXCEPTION USING ERRCODE = '` + SubmitRefused + `', MESSAGE = 'agent_pending_limit';
					END IF;
					RETURN QUERY SELECT 'created', p_id;
					RETURN;
				END IF;
				-- A submission of the same tuple committed its claim since
				-- the lookup above; the next lookup finds it, unless it
				-- has already left pending and approved.
			END LOOP;
			RETURN QUERY SELECT 'busy', NULL::TEXT;
		END $$`,
	},
}
