package claims

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"strconv"
	"strings"
	"time"
)

// Service is a registered service: the owner of a slug that claims name.
type Service struct {
	ID              string    `json:"id"`
	Slug            string    `json:"slug"`
	Name            string    `json:"name"`
	ServiceEndpoint string    `json:"service_endpoint"`
	Owner           string    `json:"owner"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
}

// APIKey is an API key record. Key is the plaintext, set only in the answer
// that creates it; only its SHA-256 is stored.
type APIKey struct {
	ID         string     `json:"id"`
	Key        string     `json:"key,omitempty"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

const apiKeyPrefix = "idn_sk_"

// newAPIKey returns a fresh plaintext key: idn_sk_ + base64url(32 bytes).
func newAPIKey() string {
	var b [32]byte
	rand.Read(b[:])
	return apiKeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func hashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

const serviceColumns = `id, slug, name, service_endpoint, owner, created_at, updated_at`

func scanService(row interface{ Scan(...any) error }) (Service, error) {
	var (
		svc              Service
		created, updated int64
	)
	err := row.Scan(&svc.ID, &svc.Slug, &svc.Name, &svc.ServiceEndpoint, &svc.Owner, &created, &updated)
	svc.CreatedAt, svc.UpdatedAt = sqldb.FromMicros(created), sqldb.FromMicros(updated)
	return svc, err
}

// insertKey adds a new active key to a service inside tx.
func insertKey(ctx context.Context, tx *sql.Tx, serviceID string, now time.Time) (APIKey, error) {
	plain := newAPIKey()
	k := APIKey{ID: sqldb.NewID("key_"), Key: plain, Prefix: plain[:len(apiKeyPrefix)+6], CreatedAt: now.UTC()}
	_, err := tx.ExecContext(ctx, `INSERT INTO api_keys (id, service_id, key_hash, prefix, created_at) VALUES ($1, $2, $3, $4, $5)`,
		k.ID, serviceID, hashAPIKey(plain), k.Prefix, sqldb.Micros(now))
	return k, sqldb.Err("insert api key", err)
}

// createService registers a service owned by owner and issues its first
// key, unless owner already has max services.
func (s *Store) createService(ctx context.Context, owner, name, endpoint, slug string, max int, now time.Time) (Service, APIKey, error) {
	svc := Service{ID: sqldb.NewID("svc_"), Slug: slug, Name: name, ServiceEndpoint: endpoint, Owner: owner, CreatedAt: now.UTC(), UpdatedAt: now.UTC()}
	var key APIKey
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		if err := s.db.LockNamespace(ctx, tx, owner); err != nil {
			return err
		}
		var owned int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM services WHERE owner = $1`, owner).Scan(&owned); err != nil {
			return sqldb.Err("count services", err)
		}
		if owned >= max {
			return errServiceLimit
		}
		var taken int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM services WHERE slug = $1`, slug).Scan(&taken); err != nil {
			return sqldb.Err("slug lookup", err)
		}
		if taken > 0 {
			return errSlugTaken
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO services (`+serviceColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $6)`,
			svc.ID, slug, name, endpoint, owner, sqldb.Micros(now))
		if sqldb.IsUniqueViolation(err) {
			return errSlugTaken
		}
		if err != nil {
			return sqldb.Err("insert service", err)
		}
		key, err = insertKey(ctx, tx, svc.ID, now)
		return err
	})
	return svc, key, err
}

func (s *Store) listServices(ctx context.Context, owner string) ([]Service, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+serviceColumns+` FROM services WHERE owner = $1 ORDER BY created_at, id`, owner)
	if err != nil {
		return nil, sqldb.Err("list services", err)
	}
	defer rows.Close()
	out := []Service{}
	for rows.Next() {
		svc, err := scanService(rows)
		if err != nil {
			return nil, sqldb.Err("scan service", err)
		}
		out = append(out, svc)
	}
	return out, sqldb.Err("list services", rows.Err())
}

// service returns the service id of owner; another owner's service is
// reported as absent, so ids reveal nothing across accounts.
func (s *Store) service(ctx context.Context, owner, id string) (Service, error) {
	svc, err := scanService(s.db.QueryRowContext(ctx, `SELECT `+serviceColumns+` FROM services WHERE id = $1 AND owner = $2`, id, owner))
	if errors.Is(err, sql.ErrNoRows) {
		return svc, ErrServiceNotFound
	}
	return svc, sqldb.Err("service", err)
}

// updateService sets the non-nil fields.
func (s *Store) updateService(ctx context.Context, owner, id string, name, endpoint *string, now time.Time) (Service, error) {
	var sets []string
	args := []any{id, owner, sqldb.Micros(now)}
	if name != nil {
		args = append(args, *name)
		sets = append(sets, "name = $4")
	}
	if endpoint != nil {
		args = append(args, *endpoint)
		sets = append(sets, "service_endpoint = $"+strconv.Itoa(len(args)))
	}
	sets = append(sets, "updated_at = $3")
	svc, err := scanService(s.db.WriteRow(ctx, `UPDATE services SET `+strings.Join(sets, ", ")+
		` WHERE id = $1 AND owner = $2 RETURNING `+serviceColumns, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return svc, ErrServiceNotFound
	}
	return svc, sqldb.Err("update service", err)
}

// deleteService removes a service and its keys. Its approved claims are
// revoked and its pending claims rejected, so nothing stays authorised for
// a service that no longer exists; the claims are returned so their events
// can be published.
func (s *Store) deleteService(ctx context.Context, owner, id string, now time.Time) (revoked, rejected []Claim, err error) {
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		var slug string
		err := tx.QueryRowContext(ctx, `SELECT slug FROM services WHERE id = $1 AND owner = $2`+s.db.ForUpdate(), id, owner).Scan(&slug)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrServiceNotFound
		}
		if err != nil {
			return sqldb.Err("service", err)
		}
		rows, err := tx.QueryContext(ctx, `UPDATE claims SET status = 'revoked', revoked_at = $2, updated_at = $2
			WHERE service = $1 AND status = 'approved' RETURNING `+claimColumns, slug, sqldb.Micros(now))
		if err != nil {
			return sqldb.Err("revoke claims", err)
		}
		revoked, err = scanClaims(rows)
		if err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `UPDATE claims SET status = 'rejected', rejected_at = $2, updated_at = $2
			WHERE service = $1 AND status = 'pending' RETURNING `+claimColumns, slug, sqldb.Micros(now))
		if err != nil {
			return sqldb.Err("reject claims", err)
		}
		if rejected, err = scanClaims(rows); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM api_keys WHERE service_id = $1`, id); err != nil {
			return sqldb.Err("delete keys", err)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM services WHERE id = $1`, id)
		return sqldb.Err("delete service", err)
	})
	return revoked, rejected, err
}

func (s *Store) listKeys(ctx context.Context, owner, serviceID string) ([]APIKey, error) {
	if _, err := s.service(ctx, owner, serviceID); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, prefix, created_at, last_used_at, revoked_at FROM api_keys
		WHERE service_id = $1 ORDER BY created_at, id`, serviceID)
	if err != nil {
		return nil, sqldb.Err("list keys", err)
	}
	defer rows.Close()
	out := []APIKey{}
	for rows.Next() {
		var (
			k             APIKey
			created       int64
			used, revoked sql.NullInt64
		)
		if err := rows.Scan(&k.ID, &k.Prefix, &created, &used, &revoked); err != nil {
			return nil, sqldb.Err("scan key", err)
		}
		k.CreatedAt = sqldb.FromMicros(created)
		k.LastUsedAt, k.RevokedAt = timePtr(used), timePtr(revoked)
		out = append(out, k)
	}
	return out, sqldb.Err("list keys", rows.Err())
}

func timePtr(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := sqldb.FromMicros(v.Int64)
	return &t
}

// createKey issues another key, refusing when max keys are already active.
// Revoked keys stay listed for their history, the newest max of them: the
// older are deleted, so revoking and creating keys in turn cannot grow the
// table.
func (s *Store) createKey(ctx context.Context, owner, serviceID string, max int, now time.Time) (APIKey, error) {
	var key APIKey
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		var id string
		err := tx.QueryRowContext(ctx, `SELECT id FROM services WHERE id = $1 AND owner = $2`+s.db.ForUpdate(), serviceID, owner).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrServiceNotFound
		}
		if err != nil {
			return sqldb.Err("service", err)
		}
		var active int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys WHERE service_id = $1 AND revoked_at IS NULL`, serviceID).Scan(&active); err != nil {
			return sqldb.Err("count keys", err)
		}
		if active >= max {
			return errKeyLimit
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM api_keys WHERE service_id = $1 AND revoked_at IS NOT NULL AND id NOT IN
			(SELECT id FROM api_keys WHERE service_id = $1 AND revoked_at IS NOT NULL ORDER BY revoked_at DESC, id DESC LIMIT $2)`,
			serviceID, max); err != nil {
			return sqldb.Err("delete old revoked keys", err)
		}
		key, err = insertKey(ctx, tx, serviceID, now)
		return err
	})
	return key, err
}

// revokeKey revokes an active key of one of owner's services.
func (s *Store) revokeKey(ctx context.Context, owner, serviceID, keyID string, now time.Time) error {
	res, err := s.db.Exec(ctx, `UPDATE api_keys SET revoked_at = $4 WHERE id = $1 AND service_id = $2 AND revoked_at IS NULL
		AND service_id IN (SELECT id FROM services WHERE owner = $3)`, keyID, serviceID, owner, sqldb.Micros(now))
	if err != nil {
		return sqldb.Err("revoke key", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errKeyNotFound
	}
	return nil
}

// serviceByKey authenticates a plaintext API key and returns its service.
// last_used_at is refreshed at most once a minute so hot keys cost no write
// per request, nor the statement that would find nothing to write.
func (s *Store) serviceByKey(ctx context.Context, key string, now time.Time) (Service, error) {
	var keyID string
	var svc Service
	var created, updated int64
	var lastUsed sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT k.id, k.last_used_at, s.id, s.slug, s.name, s.service_endpoint, s.owner, s.created_at, s.updated_at
		FROM api_keys k JOIN services s ON s.id = k.service_id WHERE k.key_hash = $1 AND k.revoked_at IS NULL`,
		hashAPIKey(key)).Scan(&keyID, &lastUsed, &svc.ID, &svc.Slug, &svc.Name, &svc.ServiceEndpoint, &svc.Owner, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return svc, errKeyNotFound
	}
	if err != nil {
		return svc, sqldb.Err("api key", err)
	}
	svc.CreatedAt, svc.UpdatedAt = sqldb.FromMicros(created), sqldb.FromMicros(updated)
	if lastUsed.Valid && lastUsed.Int64 >= sqldb.Micros(now.Add(-time.Minute)) {
		return svc, nil
	}
	_, err = s.db.Exec(ctx, `UPDATE api_keys SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $3)`,
		keyID, sqldb.Micros(now), sqldb.Micros(now.Add(-time.Minute)))
	return svc, sqldb.Err("touch api key", err)
}
