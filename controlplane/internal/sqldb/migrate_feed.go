package sqldb

// feedChangesMigration records every change to a service's approved-claims
// feed in feed_changes, numbered by the service's feed_state.version, so a
// gateway can ask for the changes since the number it last saw (feed.go)
// instead of reading the whole feed again.
//
// The number is taken by the trigger that already bumps feed_state.version,
// inside the transaction that changes the claim. On PostgreSQL that upsert
// holds the service's feed_state row locked until commit, so the changes of
// one service commit in the order of their numbers: a reader that sees
// change n has seen every change below it, and no change committed late can
// land below a number a reader has already passed. (SQLite has one writer
// at a time, so the same holds there trivially.) Numbers are per service,
// like the feed; a rolled-back change gives its number back.
//
// feed_state.pruned_through is the highest number whose change may have
// been pruned (see Store.pruneFeedChanges): a cursor below it cannot be
// served and the client reads the whole feed again. Changes before this
// migration were never recorded, so it starts at the current version.
var feedChangesMigration = migration{
	version: 12,
	name:    "feed changes: a numbered log of every change to a service's approved claims",
	stmts: []string{
		`CREATE TABLE feed_changes (
			service TEXT NOT NULL,
			seq BIGINT NOT NULL,
			claim_id TEXT NOT NULL,
			namespace TEXT NOT NULL,
			public_key TEXT NOT NULL,
			op TEXT NOT NULL,
			changed_at BIGINT NOT NULL,
			PRIMARY KEY (service, seq)
		)`,
		// The age pruning reads only the changes it prunes.
		`CREATE INDEX feed_changes_age ON feed_changes(service, changed_at)`,
		`ALTER TABLE feed_state ADD COLUMN pruned_through BIGINT NOT NULL DEFAULT 0`,
		`UPDATE feed_state SET pruned_through = version`,
	},
	sqlite: []string{
		`DROP TRIGGER claims_feed_insert`,
		`DROP TRIGGER claims_feed_update`,
		`DROP TRIGGER claims_feed_delete`,
		`CREATE TRIGGER claims_feed_insert AFTER INSERT ON claims WHEN NEW.status = 'approved' BEGIN
			INSERT INTO feed_state (service, approved, version) VALUES (NEW.service, 1, 1)
			ON CONFLICT (service) DO UPDATE SET approved = approved + 1, version = version + 1;
			INSERT INTO feed_changes (service, seq, claim_id, namespace, public_key, op, changed_at)
				SELECT service, version, NEW.id, NEW.namespace, NEW.public_key, 'upsert', NEW.updated_at
				FROM feed_state WHERE service = NEW.service;
		END`,
		`CREATE TRIGGER claims_feed_update AFTER UPDATE OF status ON claims
			WHEN OLD.status = 'approved' OR NEW.status = 'approved' BEGIN
			INSERT INTO feed_state (service, approved, version)
				VALUES (NEW.service, (NEW.status = 'approved') - (OLD.status = 'approved'), 1)
			ON CONFLICT (service) DO UPDATE SET approved = approved + excluded.approved, version = version + 1;
			INSERT INTO feed_changes (service, seq, claim_id, namespace, public_key, op, changed_at)
				SELECT service, version, NEW.id, NEW.namespace, NEW.public_key,
					CASE WHEN NEW.status = 'approved' THEN 'upsert' ELSE 'delete' END, NEW.updated_at
				FROM feed_state WHERE service = NEW.service;
		END`,
		`CREATE TRIGGER claims_feed_delete AFTER DELETE ON claims WHEN OLD.status = 'approved' BEGIN
			UPDATE feed_state SET approved = approved - 1, version = version + 1 WHERE service = OLD.service;
			INSERT INTO feed_changes (service, seq, claim_id, namespace, public_key, op, changed_at)
				SELECT service, version, OLD.id, OLD.namespace, OLD.public_key, 'delete', OLD.updated_at
				FROM feed_state WHERE service = OLD.service;
		END`,
	},
	postgres: []string{
		`CREATE OR REPLACE FUNCTION claims_feed_state() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE
			delta BIGINT := 0;
			c claims%ROWTYPE;
			op TEXT := 'delete';
			seq BIGINT;
		BEGIN
			IF TG_OP <> 'INSERT' THEN
				IF OLD.status = 'approved' THEN delta := delta - 1; c := OLD; END IF;
			END IF;
			IF TG_OP <> 'DELETE' THEN
				IF NEW.status = 'approved' THEN delta := delta + 1; c := NEW; op := 'upsert'; END IF;
				IF c.id IS NOT NULL THEN c := NEW; END IF;
			END IF;
			IF c.id IS NOT NULL THEN
				INSERT INTO feed_state (service, approved, version) VALUES (c.service, delta, 1)
				ON CONFLICT (service) DO UPDATE
					SET approved = feed_state.approved + EXCLUDED.approved, version = feed_state.version + 1
				RETURNING version INTO seq;
				INSERT INTO feed_changes (service, seq, claim_id, namespace, public_key, op, changed_at)
					VALUES (c.service, seq, c.id, c.namespace, c.public_key, op, c.updated_at);
			END IF;
			RETURN NULL;
		END $$`,
	},
}
