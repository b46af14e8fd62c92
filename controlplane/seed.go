package controlplane

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"math"
	"net/http"

	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/apierror"
)

// seedRequest is the body of POST /v1/test/seed.
type seedRequest struct {
	Namespaces []string `json:"namespaces"`
	Services   []struct {
		Slug            string `json:"slug"`
		Name            string `json:"name"`
		Owner           string `json:"owner"`
		ServiceEndpoint string `json:"service_endpoint"` // optional; default http://localhost/
	} `json:"services"`
	Claims []struct {
		Namespace string `json:"namespace"`
		Service   string `json:"service"`
		PublicKey string `json:"public_key"`
		Status    string `json:"status"` // default approved
	} `json:"claims"`
}

// seed creates namespaces (without passkeys), services with a fresh API key
// each, and claims in any status, and answers the keys and one session
// token per namespace. The route exists only when Config.TestSeedToken is
// set; a request that is not from loopback or lacks the token gets the same
// 404 as a missing route. Re-seeding an existing service of the same owner
// issues it another key.
func (s *Server) seed(w http.ResponseWriter, r *http.Request) {
	tok := r.Header.Get("X-IDN-Test-Seed-Token")
	if !s.proxy.IsLoopback(r) || subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.TestSeedToken)) != 1 {
		apierror.Write(w, r, web.ErrNotFound)
		return
	}
	s.kit.AdmitBody(r)
	var in seedRequest
	if e := s.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	ctx, now := r.Context(), s.now()
	var owners []string
	seen := map[string]bool{}
	addNS := func(ns string) *apierror.Error {
		if err := web.NamespaceProblem(ns); err != nil {
			return toAPIError(err)
		}
		if !seen[ns] {
			seen[ns] = true
			owners = append(owners, ns)
		}
		return nil
	}
	for _, ns := range in.Namespaces {
		if e := addNS(ns); e != nil {
			apierror.Write(w, r, e)
			return
		}
	}
	for _, svc := range in.Services {
		if e := addNS(svc.Owner); e != nil {
			apierror.Write(w, r, e)
			return
		}
		if !validSlug(svc.Slug) {
			apierror.Write(w, r, web.Validation("service slug %q must be 3-64 characters of a-z, 0-9 and inner hyphens", svc.Slug))
			return
		}
	}
	for _, ns := range owners {
		if err := s.store.ensureNamespace(ctx, ns, now); err != nil {
			s.writeErr(w, r, err)
			return
		}
	}
	keys := map[string]string{}
	for _, svc := range in.Services {
		name, endpoint := svc.Name, svc.ServiceEndpoint
		if name == "" {
			name = svc.Slug
		}
		if endpoint == "" {
			endpoint = "http://localhost/"
		}
		key, err := s.seedService(ctx, svc.Owner, name, endpoint, svc.Slug)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		keys[svc.Slug] = key
	}
	claims := make([]claimRecord, 0, len(in.Claims))
	for _, c := range in.Claims {
		if c.Status == "" {
			c.Status = StatusApproved
		}
		if !claimStatuses[c.Status] {
			apierror.Write(w, r, web.Validation("claim status %q is not a claim status", c.Status))
			return
		}
		if err := web.NamespaceProblem(c.Namespace); err != nil {
			s.writeErr(w, r, err)
			return
		}
		pub, err := identity.ParsePublicKey(c.PublicKey)
		if err != nil || c.Service == "" {
			apierror.Write(w, r, web.Validation("each claim needs a service and an ed25519:<base64> public_key"))
			return
		}
		if err := s.store.ensureNamespace(ctx, c.Namespace, now); err != nil {
			s.writeErr(w, r, err)
			return
		}
		stored, err := s.store.insertSeedClaim(ctx, Claim{Namespace: c.Namespace, Service: c.Service,
			PublicKey: identity.FormatPublicKey(pub), Status: c.Status}, now)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		claims = append(claims, toClaimRecord(stored))
	}
	sessions := map[string]string{}
	for _, ns := range owners {
		tok, _, err := s.IssueSession(ctx, ns)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		sessions[ns] = tok
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"api_keys": keys, "sessions": sessions, "claims": claims})
}

// seedService creates the service, or issues another key when the owner
// already has it.
func (s *Server) seedService(ctx context.Context, owner, name, endpoint, slug string) (string, error) {
	_, key, err := s.store.createService(ctx, owner, name, endpoint, slug, s.cfg.MaxServices, s.now())
	if !errors.Is(err, errSlugTaken) {
		return key.Key, err
	}
	var id string
	err = s.store.db.QueryRowContext(ctx, `SELECT id FROM services WHERE slug = $1 AND owner = $2`, slug, owner).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", errSlugTaken
	}
	if err != nil {
		return "", sqldb.Err("service", err)
	}
	key, err = s.store.createKey(ctx, owner, id, math.MaxInt, s.now())
	return key.Key, err
}
