package gatewaylink

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"time"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
)

// gatewayRecord is a row of gateways.
type gatewayRecord struct {
	ID, Namespace           string
	KeyNamespace, PublicKey string // the gateway's signing identity
	Name, Version           string
	HPKEPublicKey           string // base64url, no padding
	CreatedAt, LastSeen     time.Time
	Instance, ConnID        string // the socket holding it; "" when none
}

const gatewayColumns = `id, namespace, key_namespace, public_key, name, version, hpke_public_key, created_at, last_seen, instance, conn_id`

func scanGateway(sc interface{ Scan(...any) error }) (gatewayRecord, error) {
	var g gatewayRecord
	var created int64
	var seen sql.NullInt64
	var inst, conn sql.NullString
	err := sc.Scan(&g.ID, &g.Namespace, &g.KeyNamespace, &g.PublicKey, &g.Name, &g.Version, &g.HPKEPublicKey,
		&created, &seen, &inst, &conn)
	g.CreatedAt, g.LastSeen, g.Instance, g.ConnID = sqldb.FromMicros(created), sqldb.FromNullMicros(seen), inst.String, conn.String
	return g, err
}

// online reports whether a socket held the gateway within window.
func (g gatewayRecord) online(now time.Time, window time.Duration) bool {
	return g.Instance != "" && now.Sub(g.LastSeen) < window
}

// store is the link's tables: gateway_pairings, gateways and
// gateway_relay.
type store struct{ db *sqldb.DB }

// createPairing starts a pairing session of ns with the hash of its code,
// unless ns already has q.Gateways gateways (errGatewayLimit) or
// q.OpenPairings open sessions (a *web.RetryLater wrapping
// errPairingLimit).
func (s store) createPairing(ctx context.Context, ns, id, codeHash string, q Quotas, now time.Time) error {
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		// Expired sessions of the namespace are of no use to anyone. Their
		// rows are locked before the namespace's, the order redeemPairing
		// takes too.
		if _, err := tx.ExecContext(ctx, `DELETE FROM gateway_pairings WHERE namespace = $1 AND expires_at <= $2`,
			ns, sqldb.Micros(now)); err != nil {
			return sqldb.Err("delete expired pairings", err)
		}
		if err := s.db.LockNamespace(ctx, tx, ns); err != nil {
			return err
		}
		if err := countGateways(ctx, tx, ns, q.Gateways); err != nil {
			return err
		}
		var (
			open     int
			earliest sql.NullInt64
		)
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), MIN(expires_at) FROM gateway_pairings WHERE namespace = $1 AND ended_at IS NULL`,
			ns).Scan(&open, &earliest); err != nil {
			return sqldb.Err("count pairings", err)
		}
		if open >= q.OpenPairings {
			return web.RetryUntil(errPairingLimit, sqldb.FromMicros(earliest.Int64), now)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO gateway_pairings (id, namespace, code_hash, failures, created_at, expires_at)
			VALUES ($1, $2, $3, 0, $4, $5)`, id, ns, codeHash, sqldb.Micros(now), sqldb.Micros(now.Add(PairingTTL)))
		return sqldb.Err("insert pairing", err)
	})
}

// countGateways reports errGatewayLimit when ns has max gateways or more.
func countGateways(ctx context.Context, tx *sql.Tx, ns string, max int) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM gateways WHERE namespace = $1`, ns).Scan(&n); err != nil {
		return sqldb.Err("count gateways", err)
	}
	if n >= max {
		return errGatewayLimit
	}
	return nil
}

// pairingAttempt is what a gateway presents to complete a pairing.
type pairingAttempt struct {
	SessionID, Code, Namespace string
	KeyNamespace, PublicKey    string
	Name, Version, HPKE        string
}

// redeemPairing checks a attempt against its session and, when the code
// is right and the namespace has fewer than maxGateways gateways, ends the
// session and records the gateway. A wrong code is counted (and the
// session ended at the limit) even though the attempt fails, so the count
// survives the refusal; a namespace at its gateway limit leaves the
// session open, for a retry once the owner unpaired one.
func (s store) redeemPairing(ctx context.Context, a pairingAttempt, maxGateways int, now time.Time) (gatewayRecord, error) {
	var (
		g       gatewayRecord
		refusal error
	)
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		var ns, hash string
		var failures int
		var expires int64
		var ended sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT namespace, code_hash, failures, expires_at, ended_at FROM gateway_pairings WHERE id = $1`+s.db.ForUpdate(),
			a.SessionID).Scan(&ns, &hash, &failures, &expires, &ended)
		if errors.Is(err, sql.ErrNoRows) {
			refusal = &pairingCodeError{AttemptsLeft: -1}
			return nil
		}
		if err != nil {
			return sqldb.Err("read pairing", err)
		}
		switch {
		case ended.Valid:
			refusal = errPairingEnded
			return nil
		case !now.Before(sqldb.FromMicros(expires)):
			refusal = errPairingExpired
			return nil
		}
		code := normalizePairingCode(a.Code)
		right := code != "" && subtle.ConstantTimeCompare([]byte(pairingCodeHash(a.SessionID, code)), []byte(hash)) == 1
		if !right || (a.Namespace != "" && a.Namespace != ns) {
			failures++
			var endedAt sql.NullInt64
			if failures >= MaxPairingFailures {
				endedAt = sqldb.NullMicros(now)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE gateway_pairings SET failures = $1, ended_at = $2 WHERE id = $3`,
				failures, endedAt, a.SessionID); err != nil {
				return sqldb.Err("count pairing failure", err)
			}
			refusal = &pairingCodeError{AttemptsLeft: MaxPairingFailures - failures}
			return nil
		}
		if err := s.db.LockNamespace(ctx, tx, ns); err != nil {
			return err
		}
		if err := countGateways(ctx, tx, ns, maxGateways); err != nil {
			if errors.Is(err, errGatewayLimit) {
				refusal = err
				return nil
			}
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE gateway_pairings SET ended_at = $1 WHERE id = $2`, sqldb.Micros(now), a.SessionID); err != nil {
			return sqldb.Err("end pairing", err)
		}
		g = gatewayRecord{ID: sqldb.NewID("gw_"), Namespace: ns, KeyNamespace: a.KeyNamespace, PublicKey: a.PublicKey,
			Name: a.Name, Version: a.Version, HPKEPublicKey: a.HPKE, CreatedAt: now}
		_, err = tx.ExecContext(ctx, `INSERT INTO gateways (id, namespace, key_namespace, public_key, name, version, hpke_public_key, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`,
			g.ID, g.Namespace, g.KeyNamespace, g.PublicKey, g.Name, g.Version, g.HPKEPublicKey, sqldb.Micros(now))
		if sqldb.IsUniqueViolation(err) {
			// The key paired in a concurrent attempt; it reconnects as
			// that gateway.
			refusal = errPairingEnded
			return errors.New("rollback")
		}
		return sqldb.Err("insert gateway", err)
	})
	if refusal != nil {
		return gatewayRecord{}, refusal
	}
	return g, err
}

// pairingOpen checks that a pairing session exists and can still be
// completed, so a socket is opened only for a live session.
func (s store) pairingOpen(ctx context.Context, id string, now time.Time) error {
	var expires int64
	var ended sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT expires_at, ended_at FROM gateway_pairings WHERE id = $1`, id).Scan(&expires, &ended)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return &pairingCodeError{AttemptsLeft: -1}
	case err != nil:
		return sqldb.Err("read pairing", err)
	case ended.Valid:
		return errPairingEnded
	case !now.Before(sqldb.FromMicros(expires)):
		return errPairingExpired
	}
	return nil
}

// gatewayByKey finds the paired gateway of a signing key.
func (s store) gatewayByKey(ctx context.Context, keyNS, pub string) (gatewayRecord, error) {
	g, err := scanGateway(s.db.QueryRowContext(ctx, `SELECT `+gatewayColumns+` FROM gateways WHERE key_namespace = $1 AND public_key = $2`, keyNS, pub))
	if errors.Is(err, sql.ErrNoRows) {
		return g, errGatewayNotPaired
	}
	return g, sqldb.Err("read gateway", err)
}

// gateway returns gateway id of namespace ns.
func (s store) gateway(ctx context.Context, ns, id string) (gatewayRecord, error) {
	g, err := scanGateway(s.db.QueryRowContext(ctx, `SELECT `+gatewayColumns+` FROM gateways WHERE id = $1 AND namespace = $2`, id, ns))
	if errors.Is(err, sql.ErrNoRows) {
		return g, ErrNotFound
	}
	return g, sqldb.Err("read gateway", err)
}

// listGateways returns the gateways of ns, oldest first.
func (s store) listGateways(ctx context.Context, ns string) ([]gatewayRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+gatewayColumns+` FROM gateways WHERE namespace = $1 ORDER BY created_at, id`, ns)
	if err != nil {
		return nil, sqldb.Err("list gateways", err)
	}
	defer rows.Close()
	var out []gatewayRecord
	for rows.Next() {
		g, err := scanGateway(rows)
		if err != nil {
			return nil, sqldb.Err("scan gateway", err)
		}
		out = append(out, g)
	}
	return out, sqldb.Err("list gateways", rows.Err())
}

// deleteGateway unpairs gateway id of ns and returns the row as it was.
func (s store) deleteGateway(ctx context.Context, ns, id string) (gatewayRecord, error) {
	var g gatewayRecord
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		var err error
		g, err = scanGateway(tx.QueryRowContext(ctx, `SELECT `+gatewayColumns+` FROM gateways WHERE id = $1 AND namespace = $2`+s.db.ForUpdate(), id, ns))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return sqldb.Err("read gateway", err)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM gateways WHERE id = $1`, id)
		return sqldb.Err("delete gateway", err)
	})
	return g, err
}

// attachGateway records that socket connID of instance holds gateway id
// now, replacing whichever socket held it before.
func (s store) attachGateway(ctx context.Context, id, instance, connID string, now time.Time) (bool, error) {
	res, err := s.db.Exec(ctx, `UPDATE gateways SET instance = $1, conn_id = $2, last_seen = $3 WHERE id = $4`,
		instance, connID, sqldb.Micros(now), id)
	if err != nil {
		return false, sqldb.Err("attach gateway", err)
	}
	n, err := res.RowsAffected()
	return n == 1, sqldb.Err("attach gateway", err)
}

// heartbeat refreshes last_seen of the gateway held by socket connID and
// reports false when the gateway was unpaired or is held by another
// socket now.
func (s store) heartbeat(ctx context.Context, id, connID string, now time.Time) (bool, error) {
	res, err := s.db.Exec(ctx, `UPDATE gateways SET last_seen = $1 WHERE id = $2 AND conn_id = $3`, sqldb.Micros(now), id, connID)
	if err != nil {
		return false, sqldb.Err("gateway heartbeat", err)
	}
	n, err := res.RowsAffected()
	return n == 1, sqldb.Err("gateway heartbeat", err)
}

// detachGateway records that socket connID no longer holds gateway id (a
// newer socket's claim is left alone).
func (s store) detachGateway(ctx context.Context, id, connID string, now time.Time) error {
	_, err := s.db.Exec(ctx, `UPDATE gateways SET instance = NULL, conn_id = NULL, last_seen = $1 WHERE id = $2 AND conn_id = $3`,
		sqldb.Micros(now), id, connID)
	return sqldb.Err("detach gateway", err)
}

// relayRowTTL is how long an unread relay row is kept (its reader died).
const relayRowTTL = 5 * time.Minute

// putRelayRow stores a relay message too large for a notification.
func (s store) putRelayRow(ctx context.Context, payload []byte, now time.Time) (string, error) {
	if _, err := s.db.Exec(ctx, `DELETE FROM gateway_relay WHERE created_at < $1`, sqldb.Micros(now.Add(-relayRowTTL))); err != nil {
		return "", sqldb.Err("prune relay rows", err)
	}
	id := sqldb.NewID("rly_")
	_, err := s.db.Exec(ctx, `INSERT INTO gateway_relay (id, payload, created_at) VALUES ($1, $2, $3)`, id, string(payload), sqldb.Micros(now))
	return id, sqldb.Err("insert relay row", err)
}

// takeRelayRow reads and deletes a relay row.
func (s store) takeRelayRow(ctx context.Context, id string) ([]byte, error) {
	var payload string
	err := s.db.WriteRow(ctx, `DELETE FROM gateway_relay WHERE id = $1 RETURNING payload`, id).Scan(&payload)
	return []byte(payload), sqldb.Err("take relay row", err)
}

// deleteExpiredPairings deletes the pairing sessions expired at now.
func (s store) deleteExpiredPairings(ctx context.Context, now time.Time) error {
	_, err := s.db.Exec(ctx, `DELETE FROM gateway_pairings WHERE expires_at <= $1`, sqldb.Micros(now))
	return sqldb.Err("delete pairings", err)
}

// unpairNamespace deletes the pairing sessions and the gateways of ns
// within tx and returns the gateways as they were.
func unpairNamespace(ctx context.Context, tx *sql.Tx, ns string) ([]gatewayRecord, error) {
	if _, err := tx.ExecContext(ctx, `DELETE FROM gateway_pairings WHERE namespace = $1`, ns); err != nil {
		return nil, sqldb.Err("delete pairings", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM gateway_connect_flows WHERE namespace = $1`, ns); err != nil {
		return nil, sqldb.Err("delete connect flows", err)
	}
	rows, err := tx.QueryContext(ctx, `DELETE FROM gateways WHERE namespace = $1 RETURNING `+gatewayColumns, ns)
	if err != nil {
		return nil, sqldb.Err("delete gateways", err)
	}
	defer rows.Close()
	var deleted []gatewayRecord
	for rows.Next() {
		g, err := scanGateway(rows)
		if err != nil {
			return nil, sqldb.Err("delete gateways", err)
		}
		deleted = append(deleted, g)
	}
	return deleted, sqldb.Err("delete gateways", rows.Err())
}
