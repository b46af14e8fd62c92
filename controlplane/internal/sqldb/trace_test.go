package sqldb

import "testing"

func TestStatementSummary(t *testing.T) {
	for _, c := range []struct{ query, op, table string }{
		{"SELECT status, COUNT(*) FROM claims GROUP BY status", "SELECT", "claims"},
		{"INSERT INTO nonces (scope, nonce) VALUES ($1, $2)", "INSERT", "nonces"},
		{"\n\t\tUPDATE webhooks SET x = $1", "UPDATE", "webhooks"},
		{"delete from sessions where id = $1", "DELETE", "sessions"},
		{"PRAGMA journal_mode=WAL", "PRAGMA", ""},
		{"SELECT 1 FROM $1", "SELECT", ""},
		{"", "SQL", ""},
	} {
		if op, table := statementSummary(c.query); op != c.op || table != c.table {
			t.Errorf("statementSummary(%q) = %q %q, want %q %q", c.query, op, table, c.op, c.table)
		}
	}
}
