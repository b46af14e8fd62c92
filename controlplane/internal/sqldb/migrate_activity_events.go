package sqldb

// activityEventsMigration lets a gateway report changes of its own that
// no agent's request made (an MCP tool's pinned definition changed,
// accepted or rejected) as activity records: event names the change, and
// such a record is bounded and kept with the agents' records.
var activityEventsMigration = migration{
	version: 24,
	name:    "activity: changes a gateway made of its own, such as tool pin events",
	stmts: []string{
		`ALTER TABLE activity ADD COLUMN event TEXT NOT NULL DEFAULT ''`,
	},
}
