package sqldb

// FeedChannel is the PostgreSQL notification channel on which every commit
// that changes a service's approved-claims feed announces it, with the
// service's slug as the payload. A feed request that waits for changes
// (?since=…&wait=…) is woken by it on whichever instance it waits.
const FeedChannel = "idn_feed"

// feedNotifyMigration makes every change to the feed's change log NOTIFY
// FeedChannel (PostgreSQL only; SQLite has one instance per file, which
// wakes its waiters in process). The notification is part of the
// transaction: it is delivered when the change commits and never for one
// rolled back, and PostgreSQL folds the identical notifications of one
// transaction into one, so a bulk revocation of a service announces it
// once.
var feedNotifyMigration = migration{
	version: 16,
	name:    "feed notify: a committed feed change is announced on channel idn_feed",
	postgres: []string{
		`CREATE FUNCTION feed_changes_notify() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM pg_notify('` + FeedChannel + `', NEW.service);
			RETURN NULL;
		END $$`,
		`CREATE TRIGGER feed_changes_notify AFTER INSERT ON feed_changes
			FOR EACH ROW EXECUTE FUNCTION feed_changes_notify()`,
	},
}
