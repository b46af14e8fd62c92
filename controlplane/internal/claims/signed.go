package claims

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"strings"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/signed"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
)

// standing is what admits a caller to the service routes: the service of
// the API key it presented, or, for a gateway its owner paired that
// presented none, the owner's namespace, whose services (and no other's)
// it stands for.
type standing struct {
	key   *Service // the API key's service; nil for a paired gateway
	owner string   // the paired gateway's owner namespace
}

// Errors of the service routes' admission.
var (
	errNoStanding = apierror.Coded(errcode.APIKeyInvalid,
		"missing or invalid service api key: send Authorization: Bearer <the service's idn_sk_ key>, or sign as a gateway its owner paired")
	errNotOwnersService = apierror.Coded(errcode.NamespaceForbidden,
		"the service is not one of the services of the owner who paired this gateway")
)

// serviceAdmission admits the service routes (the feed, claim submissions,
// verification): like signed.Gate.Public, plus a standing, the service API
// key of the Authorization bearer header or, without that header, a
// signature by a gateway an owner paired (gateways).
type serviceAdmission struct {
	gate     *signed.Gate
	store    *Store
	kit      *web.Kit
	gateways Gateways // nil: API keys only
}

// fail answers err through ErrorRules and the kit.
func (a *serviceAdmission) fail(w http.ResponseWriter, r *http.Request, err error) {
	a.kit.Error(w, r, ErrorRules.Answer(err))
}

// wrap checks the standing before the nonce is recorded (in the database)
// and before the body is read; the route then resolves the service it
// names with service.
func (a *serviceAdmission) wrap(next func(http.ResponseWriter, *http.Request, standing)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, ok := a.gate.Verify(w, r)
		if !ok {
			return
		}
		st, ok := a.standing(w, r, caller)
		if ok && a.gate.RecordNonce(w, r, caller) && a.gate.ReadBody(w, r, caller) {
			next(w, r, st)
		}
	})
}

// standing reads the caller's standing; on failure it has answered.
func (a *serviceAdmission) standing(w http.ResponseWriter, r *http.Request, caller *identity.Caller) (standing, bool) {
	if _, sent := r.Header["Authorization"]; sent || a.gateways == nil {
		svc, ok := a.serviceKey(w, r)
		return standing{key: &svc}, ok
	}
	owner, err := a.gateways.PairedOwner(r.Context(), caller.Namespace, caller.PublicKey)
	if err != nil {
		a.fail(w, r, err)
		return standing{}, false
	}
	if owner == "" {
		apierror.Write(w, r, errNoStanding)
		return standing{}, false
	}
	return standing{owner: owner}, true
}

// service returns the service slug names under st: the API key's own (an
// empty slug names it too), or a service of the paired gateway's owner;
// on failure it has answered. Another owner's service and a service that
// does not exist are refused alike, so a gateway learns nothing of
// others' slugs.
func (a *serviceAdmission) service(w http.ResponseWriter, r *http.Request, st standing, slug string) (Service, bool) {
	if st.key != nil {
		if slug != "" && slug != st.key.Slug {
			apierror.Write(w, r, errServiceMismatch)
			return Service{}, false
		}
		return *st.key, true
	}
	if slug == "" {
		apierror.Write(w, r, web.Validation("service is required: a paired gateway names the service it reads or files for"))
		return Service{}, false
	}
	svc, err := a.store.ownedService(r.Context(), st.owner, slug)
	if errors.Is(err, ErrServiceNotFound) {
		apierror.Write(w, r, errNotOwnersService)
		return Service{}, false
	}
	if err != nil {
		a.fail(w, r, err)
		return Service{}, false
	}
	return svc, true
}

// serviceKey authenticates the service API key of the Authorization bearer
// header; on failure it has answered.
func (a *serviceAdmission) serviceKey(w http.ResponseWriter, r *http.Request) (Service, bool) {
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !strings.HasPrefix(key, apiKeyPrefix) {
		apierror.Write(w, r, errAPIKeyInvalid)
		return Service{}, false
	}
	svc, err := a.store.serviceByKey(r.Context(), key, a.kit.Now())
	if errors.Is(err, errKeyNotFound) {
		apierror.Write(w, r, errAPIKeyInvalid)
		return Service{}, false
	}
	if err != nil {
		a.fail(w, r, err)
		return Service{}, false
	}
	return svc, true
}

// ownedService returns the service of slug when owner owns it.
func (s *Store) ownedService(ctx context.Context, owner, slug string) (Service, error) {
	svc, err := scanService(s.db.QueryRowContext(ctx, `SELECT `+serviceColumns+` FROM services WHERE slug = $1 AND owner = $2`, slug, owner))
	if errors.Is(err, sql.ErrNoRows) {
		return svc, ErrServiceNotFound
	}
	return svc, sqldb.Err("service", err)
}
