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
	// OAuthAccount: Account names the OAuth account that served the call
	// (its subject, "" for the connection's one account).
	OAuthAccount bool
	Account      string
	// Event names a change the gateway made of its own
	// (pairwire.Activity's Event); empty for a decision on a request.
	Event string
}

// Filter selects records of one namespace. Empty fields select all.
type Filter struct {
	// Agent matches a part of the agent's name, whatever its case
	// (ASCII letters on SQLite, every letter on PostgreSQL), or its key
	// whole.
	Agent      string
	Connection string
	Service    string // a service's slug
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

const columns = `id, gateway_id, at, agent_name, agent_key, connection_id, service, protocol, method, route, tool, decision, reason, status, latency_us, account, event`

// Unverified is how many requests a gateway refused for one reason, in
// one minute, before a signature verified.
type Unverified struct {
	GatewayID        string
	Minute           time.Time
	Protocol, Reason string
	Count            int64
}

// likeEscaper makes LIKE's wildcards and its escape character stand for
// themselves, with ESCAPE '\'.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// store is the activity, activity_counts and activity_unverified tables.
type store struct{ db *sqldb.DB }

// insertChunk is how many rows one INSERT carries.
const insertChunk = 100

// class is one of the two kinds of record, each bounded on its own: a
// flood of records with no verified agent never evicts a signed one.
type class struct {
	where  string // selects the class's rows of activity
	column string // its count in activity_counts
}

// A gateway's own event is no stranger's doing: it is kept with the
// agents' records.
var (
	signedClass   = class{where: `(agent_key <> '' OR event <> '')`, column: "n"}
	unsignedClass = class{where: `agent_key = '' AND event = ''`, column: "unsigned_n"}
)

// unsigned reports whether r is of the unsigned class.
func (r *Record) unsigned() bool { return r.AgentKey == "" && r.Event == "" }

// insert stores recs and counts in namespace ns and deletes the
// namespace's oldest rows of a class past its bound (maxSigned,
// maxUnsigned), in one transaction, so the namespace never holds more
// once it commits.
func (s store) insert(ctx context.Context, ns, gatewayID string, recs []Record, counts []Unverified, maxSigned, maxUnsigned int64) error {
	if len(recs) == 0 && len(counts) == 0 {
		return nil
	}
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		for _, c := range counts {
			_, err := tx.ExecContext(ctx, `INSERT INTO activity_unverified (namespace, gateway_id, minute, protocol, reason, n)
				VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (namespace, minute, gateway_id, protocol, reason)
				DO UPDATE SET n = activity_unverified.n + excluded.n`, ns, gatewayID, sqldb.Micros(c.Minute), c.Protocol, c.Reason, c.Count)
			if err != nil {
				return sqldb.Err("count unverified activity", err)
			}
		}
		for start := 0; start < len(recs); start += insertChunk {
			chunk := recs[start:min(start+insertChunk, len(recs))]
			var q strings.Builder
			q.WriteString(`INSERT INTO activity (namespace, ` + columns + `) VALUES `)
			args := make([]any, 0, len(chunk)*18)
			for i, r := range chunk {
				if i > 0 {
					q.WriteString(", ")
				}
				q.WriteString("(")
				for j := range 18 {
					if j > 0 {
						q.WriteString(", ")
					}
					fmt.Fprintf(&q, "$%d", i*18+j+1)
				}
				q.WriteString(")")
				args = append(args, ns, r.ID, gatewayID, sqldb.Micros(r.At), r.AgentName, r.AgentKey, r.Connection, r.Service,
					r.Protocol, r.Method, r.Route, r.Tool, r.Decision, r.Reason, r.Status, r.Latency.Microseconds(),
					sql.NullString{String: r.Account, Valid: r.OAuthAccount}, r.Event)
			}
			if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
				return sqldb.Err("insert activity", err)
			}
		}
		if len(recs) == 0 {
			return nil
		}
		var unsigned int64
		for _, r := range recs {
			if r.unsigned() {
				unsigned++
			}
		}
		var n, un int64
		err := tx.QueryRowContext(ctx, `INSERT INTO activity_counts (namespace, n, unsigned_n) VALUES ($1, $2, $3)
			ON CONFLICT (namespace) DO UPDATE SET n = activity_counts.n + excluded.n, unsigned_n = activity_counts.unsigned_n + excluded.unsigned_n
			RETURNING n, unsigned_n`, ns, int64(len(recs))-unsigned, unsigned).Scan(&n, &un)
		if err != nil {
			return sqldb.Err("count activity", err)
		}
		if err := bound(ctx, tx, ns, signedClass, n-maxSigned); err != nil {
			return err
		}
		return bound(ctx, tx, ns, unsignedClass, un-maxUnsigned)
	})
}

// bound deletes the over oldest records of class c in ns, if over > 0.
func bound(ctx context.Context, tx *sql.Tx, ns string, c class, over int64) error {
	if over <= 0 {
		return nil
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM activity WHERE id IN
		(SELECT id FROM activity WHERE namespace = $1 AND `+c.where+` ORDER BY at, id LIMIT $2)`, ns, over)
	if err != nil {
		return sqldb.Err("bound activity", err)
	}
	gone, _ := res.RowsAffected()
	_, err = tx.ExecContext(ctx, `UPDATE activity_counts SET `+c.column+` = `+c.column+` - $2 WHERE namespace = $1`, ns, gone)
	return sqldb.Err("count activity", err)
}

// listUnverified returns up to limit counts of ns with since <= minute <
// until (zero is open), newest first.
func (s store) listUnverified(ctx context.Context, ns string, since, until time.Time, limit int) ([]Unverified, error) {
	q := `SELECT gateway_id, minute, protocol, reason, n FROM activity_unverified WHERE namespace = $1`
	args := []any{ns}
	if !since.IsZero() {
		args = append(args, sqldb.Micros(since))
		q += fmt.Sprintf(` AND minute >= $%d`, len(args))
	}
	if !until.IsZero() {
		args = append(args, sqldb.Micros(until))
		q += fmt.Sprintf(` AND minute < $%d`, len(args))
	}
	args = append(args, limit)
	q += fmt.Sprintf(` ORDER BY minute DESC, gateway_id, protocol, reason LIMIT $%d`, len(args))
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, sqldb.Err("list unverified activity", err)
	}
	defer rows.Close()
	var out []Unverified
	for rows.Next() {
		var u Unverified
		var minute int64
		if err := rows.Scan(&u.GatewayID, &minute, &u.Protocol, &u.Reason, &u.Count); err != nil {
			return nil, sqldb.Err("scan unverified activity", err)
		}
		u.Minute = sqldb.FromMicros(minute)
		out = append(out, u)
	}
	return out, sqldb.Err("list unverified activity", rows.Err())
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
		var account sql.NullString
		if err := rows.Scan(&r.ID, &r.GatewayID, &at, &r.AgentName, &r.AgentKey, &r.Connection, &r.Service, &r.Protocol,
			&r.Method, &r.Route, &r.Tool, &r.Decision, &r.Reason, &r.Status, &lat, &account, &r.Event); err != nil {
			return nil, sqldb.Err("scan activity", err)
		}
		r.At, r.Latency = sqldb.FromMicros(at), time.Duration(lat)*time.Microsecond
		r.OAuthAccount, r.Account = account.Valid, account.String
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
		q += ` AND (LOWER(agent_name) LIKE ` + arg("%"+likeEscaper.Replace(strings.ToLower(f.Agent))+"%") + ` ESCAPE '\'` +
			` OR agent_key = ` + arg(f.Agent) + `)`
	}
	if f.Connection != "" {
		q += ` AND connection_id = ` + arg(f.Connection)
	}
	if f.Service != "" {
		q += ` AND service = ` + arg(f.Service)
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

// prune deletes the signed records older than signedCutoff, and the
// others and the counts of unverified refusals older than
// unsignedCutoff.
func (s store) prune(ctx context.Context, signedCutoff, unsignedCutoff time.Time) (int64, error) {
	n, err := s.pruneClass(ctx, signedClass, signedCutoff)
	if err != nil {
		return n, err
	}
	un, err := s.pruneClass(ctx, unsignedClass, unsignedCutoff)
	if err != nil {
		return n + un, err
	}
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM activity_unverified WHERE minute < $1`, sqldb.Micros(unsignedCutoff))
		return sqldb.Err("prune unverified activity", err)
	})
	return n + un, err
}

// pruneClass deletes the records of class c older than cutoff, oldest
// first, and keeps the counts in step.
func (s store) pruneClass(ctx context.Context, c class, cutoff time.Time) (int64, error) {
	var total int64
	for range pruneChunks {
		var n int64
		err := s.db.Tx(ctx, func(tx *sql.Tx) error {
			rows, err := tx.QueryContext(ctx, `SELECT id, namespace FROM activity WHERE at < $1 AND `+c.where+` ORDER BY at LIMIT $2`,
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
				if _, err := tx.ExecContext(ctx, `UPDATE activity_counts SET `+c.column+` = `+c.column+` - $2 WHERE namespace = $1`, ns, len(ids)); err != nil {
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
	for _, q := range []string{`DELETE FROM activity WHERE namespace = $1`, `DELETE FROM activity_counts WHERE namespace = $1`,
		`DELETE FROM activity_unverified WHERE namespace = $1`, `DELETE FROM account_alerts WHERE namespace = $1`} {
		if _, err := tx.ExecContext(ctx, q, ns); err != nil {
			return sqldb.Err("delete activity", err)
		}
	}
	return nil
}
