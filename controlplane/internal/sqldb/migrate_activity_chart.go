package sqldb

// activityChartMigration indexes the activity by namespace and time with
// each record's decision and reason, so the dashboard's chart counts a
// selection from the index alone, without reading the records.
var activityChartMigration = migration{
	version: 19,
	name:    "activity chart: decisions and reasons by namespace and time, in an index",
	stmts: []string{
		`CREATE INDEX activity_chart ON activity(namespace, at, decision, reason)`,
	},
}
