package activity

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
)

// Record is one stored decision.
type Record struct {
	ID, GatewayID       string
	At                  time.Time
	AgentName, AgentKey string
	Connection, Service string
	Protocol, Method    string
	Route, Tool         string
	Decision, Reason    string
	Status              int
	Latency             time.Duration
}

// Filter selects records of one namespace. Empty fields select all.
type Filter struct {
	// Agent matches the agent's name or its key exactly.
	Agent      string
	Connection string
	Decision   string
	// Since and Until bound At: Since <= At < Until; zero is open.
	Since, Until time.Time
	// Before continues a listing after the last record of its previous
	// page (keyset pagination, newest first); zero starts at the newest.
	Before Cursor
}

// Cursor is a record's place in the newest-first order.
type Cursor struct {
	At int64 // microseconds
	ID string
}

const columns = `id, gateway_id, at, agent_name, agent_key, connection_id, service, protocol, method, route, tool, decision, reason, status, latency_us`

// store is the activity and activity_counts tables.
type store struct{ db *sqldb.DB }

// insertChunk is how many rows one INSERT carries.
const insertChunk = 100

// insert stores recs in namespace ns and deletes the namespace's oldest
// rows past max, in one transaction, so the namespace never holds more
// than max once it commits.
func (s store) insert(ctx context.Context, ns, gatewayID string, recs []Record, max int64) error {
	if len(recs) == 0 {
		return nil
	}
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		for start := 0; start < len(recs); start += insertChunk {
			chunk := recs[start:min(start+insertChunk, len(recs))]
			var q strings.Builder
			q.WriteString(`INSERT INTO activity (namespace, ` + columns + `) VALUES `)
			args := make([]any, 0, len(chunk)*16)
			for i, r := range chunk {
				if i > 0 {
					q.WriteString(", ")
				}
				q.WriteString("(")
				for j := range 16 {
					if j > 0 {
						q.WriteString(", ")
					}
					fmt.Fprintf(&q, "$%d", i*16+j+1)
				}
				q.WriteString(")")
				args = append(args, ns, r.ID, gatewayID, sqldb.Micros(r.At), r.AgentName, r.AgentKey, r.Connection, r.Service,
					r.Protocol, r.Method, r.Route, r.Tool, r.Decision, r.Reason, r.Status, r.Latency.Microseconds())
			}
			if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
				return sqldb.Err("insert activity", err)
			}
		}
		var n int64
		err := tx.QueryRowContext(ctx, `INSERT INTO activity_counts (namespace, n) VALUES ($1, $2)
			ON CONFLICT (namespace) DO UPDATE SET n = activity_counts.n + excluded.n RETURNING n`, ns, len(recs)).Scan(&n)
		if err != nil {
			return sqldb.Err("count activity", err)
		}
		if n <= max {
			return nil
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM activity WHERE id IN
			(SELECT id FROM activity WHERE namespace = $1 ORDER BY at, id LIMIT $2)`, ns, n-max)
		if err != nil {
			return sqldb.Err("bound activity", err)
		}
		gone, _ := res.RowsAffected()
		_, err = tx.ExecContext(ctx, `UPDATE activity_counts SET n = n - $2 WHERE namespace = $1`, ns, gone)
		return sqldb.Err("count activity", err)
	})
}

// list returns up to limit records of ns matching f, newest first.
func (s store) list(ctx context.Context, ns string, f Filter, limit int) ([]Record, error) {
	args := []any{ns}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	q := `SELECT ` + columns + ` FROM activity WHERE namespace = $1` + f.where(arg)
	if f.Before.ID != "" {
		at := arg(f.Before.At)
		q += ` AND (at < ` + at + ` OR (at = ` + at + ` AND id < ` + arg(f.Before.ID) + `))`
	}
	q += ` ORDER BY at DESC, id DESC LIMIT ` + arg(limit)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, sqldb.Err("list activity", err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var r Record
		var at, lat int64
		if err := rows.Scan(&r.ID, &r.GatewayID, &at, &r.AgentName, &r.AgentKey, &r.Connection, &r.Service, &r.Protocol,
			&r.Method, &r.Route, &r.Tool, &r.Decision, &r.Reason, &r.Status, &lat); err != nil {
			return nil, sqldb.Err("scan activity", err)
		}
		r.At, r.Latency = sqldb.FromMicros(at), time.Duration(lat)*time.Microsecond
		out = append(out, r)
	}
	return out, sqldb.Err("list activity", rows.Err())
}

// where is the SQL of f's selection but its cursor, each clause led by
// AND, with arg adding a value and naming its placeholder. The listing
// and the chart share it, so both select the same records.
func (f Filter) where(arg func(any) string) string {
	q := ""
	if f.Agent != "" {
		p := arg(f.Agent)
		q += ` AND (agent_name = ` + p + ` OR agent_key = ` + p + `)`
	}
	if f.Connection != "" {
		q += ` AND connection_id = ` + arg(f.Connection)
	}
	if f.Decision != "" {
		q += ` AND decision = ` + arg(f.Decision)
	}
	if !f.Since.IsZero() {
		q += ` AND at >= ` + arg(sqldb.Micros(f.Since))
	}
	if !f.Until.IsZero() {
		q += ` AND at < ` + arg(sqldb.Micros(f.Until))
	}
	return q
}

// pruneChunk and pruneChunks bound one maintenance run's deletions.
const (
	pruneChunk  = 5000
	pruneChunks = 20
)

// prune deletes the records older than cutoff, oldest first, and keeps
// the counts in step.
func (s store) prune(ctx context.Context, cutoff time.Time) (int64, error) {
	var total int64
	for range pruneChunks {
		var n int64
		err := s.db.Tx(ctx, func(tx *sql.Tx) error {
			rows, err := tx.QueryContext(ctx, `SELECT id, namespace FROM activity WHERE at < $1 ORDER BY at LIMIT $2`,
				sqldb.Micros(cutoff), pruneChunk)
			if err != nil {
				return sqldb.Err("read old activity", err)
			}
			byNS := map[string][]any{}
			for rows.Next() {
				var id, ns string
				if err := rows.Scan(&id, &ns); err != nil {
					rows.Close()
					return sqldb.Err("scan old activity", err)
				}
				byNS[ns] = append(byNS[ns], id)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return sqldb.Err("read old activity", err)
			}
			for ns, ids := range byNS {
				for start := 0; start < len(ids); start += 500 {
					chunk := ids[start:min(start+500, len(ids))]
					ph := make([]string, len(chunk))
					for i := range chunk {
						ph[i] = fmt.Sprintf("$%d", i+1)
					}
					if _, err := tx.ExecContext(ctx, `DELETE FROM activity WHERE id IN (`+strings.Join(ph, ", ")+`)`, chunk...); err != nil {
						return sqldb.Err("prune activity", err)
					}
				}
				if _, err := tx.ExecContext(ctx, `UPDATE activity_counts SET n = n - $2 WHERE namespace = $1`, ns, len(ids)); err != nil {
					return sqldb.Err("count activity", err)
				}
				n += int64(len(ids))
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < pruneChunk {
			break
		}
	}
	return total, nil
}

// deleteNamespace deletes every record of ns within tx.
func deleteNamespace(ctx context.Context, tx *sql.Tx, ns string) error {
	for _, q := range []string{`DELETE FROM activity WHERE namespace = $1`, `DELETE FROM activity_counts WHERE namespace = $1`} {
		if _, err := tx.ExecContext(ctx, q, ns); err != nil {
			return sqldb.Err("delete activity", err)
		}
	}
	return nil
}
