package claims

import (
	"context"
	"database/sql"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/web"
	"math"
	"net/http"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/didresolve"
)

// What the dashboard and the composition read and make of the claims,
// without HTTP.

// ValidStatus reports whether status is a claim status.
func ValidStatus(status string) bool { return claimStatuses[status] }

// OwnerClaims is a page of the claims of ns, newest first, of status
// (and of service slug when not empty), placed by cur; an unknown cursor
// is ErrClaimNotFound.
func (s *Core) OwnerClaims(ctx context.Context, ns, status, slug string, limit int, cur Cursor) (Page, error) {
	return s.store.ownerClaims(ctx, ns, status, slug, limit, cur)
}

// Neighbours are the cursors of the pages before and after p ("" when
// there is none).
func Neighbours(p Page) (before, after string) {
	pg := ownerPagination(p, 0, 0)
	return pg.PrevBefore, pg.NextAfter
}

// ClaimCounts returns how many claims of ns are in each status, only
// those of service slug when it is not empty.
func (s *Core) ClaimCounts(ctx context.Context, ns, slug string) (map[string]int64, error) {
	return s.store.claimCounts(ctx, ns, slug)
}

// ClaimServices returns the distinct service slugs that hold claims of ns,
// in order.
func (s *Core) ClaimServices(ctx context.Context, ns string) ([]string, error) {
	return s.store.claimServices(ctx, ns)
}

// Services returns the services ns owns.
func (s *Core) Services(ctx context.Context, ns string) ([]Service, error) {
	return s.store.listServices(ctx, ns)
}

// Service returns service id of ns (ErrServiceNotFound).
func (s *Core) Service(ctx context.Context, ns, id string) (Service, error) {
	return s.store.service(ctx, ns, id)
}

// Keys returns the API keys of service id of ns.
func (s *Core) Keys(ctx context.Context, ns, id string) ([]APIKey, error) {
	return s.store.listKeys(ctx, ns, id)
}

// DIDDocument returns the DID document of ns as public resolution serves
// it.
func (s *Core) DIDDocument(r *http.Request, ns string) (*didresolve.Document, error) {
	res, err := s.store.lookupDID(r.Context(), ns)
	if err != nil {
		return nil, err
	}
	doc, _ := s.document(r, res)
	return doc, nil
}

// Active reports whether namespace ns exists and is active
// (sqldb.ErrNamespaceNotFound, sqldb.ErrNamespaceDeactivated otherwise).
func (s *Core) Active(ctx context.Context, ns string) error {
	rec, err := s.store.namespace(ctx, ns)
	if err == nil && !rec.Deactivated.IsZero() {
		err = errNamespaceDeactivated
	}
	return err
}

// ServiceSpec is a service to provision.
type ServiceSpec struct {
	Slug, Name, Endpoint string
}

// Provision creates namespace ns (and its account, without passkeys) when
// it is absent and, when svc.Slug is set, the service svc owned by ns with
// a fresh API key, which it returns; a service ns already owns gets
// another key. It is the API behind the test seed and what an embedder
// calls to set up an owner without HTTP.
func (s *Core) Provision(ctx context.Context, ns string, svc ServiceSpec) (apiKey string, err error) {
	now := s.kit.Now()
	if err := s.store.ensureNamespace(ctx, ns, now); err != nil || svc.Slug == "" {
		return "", err
	}
	if !ValidSlug(svc.Slug) {
		return "", web.Validation("service slug %q must be 3-64 characters of a-z, 0-9 and inner hyphens", svc.Slug)
	}
	name, endpoint := svc.Name, svc.Endpoint
	if name == "" {
		name = svc.Slug
	}
	if endpoint == "" {
		endpoint = "http://localhost/"
	}
	_, key, err := s.store.createService(ctx, ns, name, endpoint, svc.Slug, s.cfg.MaxServices, now)
	if !errors.Is(err, errSlugTaken) {
		return key.Key, err
	}
	var id string
	err = s.store.db.QueryRowContext(ctx, `SELECT id FROM services WHERE slug = $1 AND owner = $2`, svc.Slug, ns).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", errSlugTaken
	}
	if err != nil {
		return "", sqldb.Err("service", err)
	}
	key, err = s.store.createKey(ctx, ns, id, math.MaxInt, now)
	return key.Key, err
}

// Seed stores claim c (namespace, service, public key and status) as it
// is, creating its namespace when absent, for tests that need claims in
// any status.
func (s *Core) Seed(ctx context.Context, c Claim) (Claim, error) {
	now := s.kit.Now()
	if err := s.store.ensureNamespace(ctx, c.Namespace, now); err != nil {
		return c, err
	}
	return s.store.insertSeedClaim(ctx, c, now)
}

// claimCounts returns how many claims of ns are in each status, only those
// of service slug when it is not empty: a few rows of claim_counts, at any
// number of claims.
func (s *Store) claimCounts(ctx context.Context, ns, slug string) (map[string]int64, error) {
	q, args := `SELECT status, CAST(SUM(n) AS BIGINT) FROM claim_counts WHERE namespace = $1`, []any{ns}
	if slug != "" {
		q, args = q+` AND service = $2`, append(args, slug)
	}
	rows, err := s.db.QueryContext(ctx, q+` GROUP BY status`, args...)
	if err != nil {
		return nil, sqldb.Err("count claims", err)
	}
	defer rows.Close()
	out := make(map[string]int64, 5)
	for rows.Next() {
		var (
			status string
			n      int64
		)
		if err := rows.Scan(&status, &n); err != nil {
			return nil, sqldb.Err("count claims", err)
		}
		out[status] = n
	}
	return out, sqldb.Err("count claims", rows.Err())
}

// claimServices returns the distinct service slugs that hold claims of ns,
// in order: the choices of the claims page's service filter, read from
// claim_counts.
func (s *Store) claimServices(ctx context.Context, ns string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT service FROM claim_counts WHERE namespace = $1
		GROUP BY service HAVING SUM(n) > 0 ORDER BY service`, ns)
	if err != nil {
		return nil, sqldb.Err("claim services", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var slug string
		if err := rows.Scan(&slug); err != nil {
			return nil, sqldb.Err("claim services", err)
		}
		out = append(out, slug)
	}
	return out, sqldb.Err("claim services", rows.Err())
}
