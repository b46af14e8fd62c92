package controlplane

import (
	"crypto/subtle"
	"github.com/idnhq/idn/controlplane/internal/claims"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/http"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/identity"
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
	ctx := r.Context()
	var owners []string
	seen := map[string]bool{}
	owners = append(owners, in.Namespaces...)
	for _, svc := range in.Services {
		owners = append(owners, svc.Owner)
	}
	for _, ns := range owners {
		if e := web.NamespaceProblem(ns); e != nil {
			apierror.Write(w, r, e)
			return
		}
	}
	for _, svc := range in.Services {
		if !claims.ValidSlug(svc.Slug) {
			apierror.Write(w, r, web.Validation("service slug %q must be 3-64 characters of a-z, 0-9 and inner hyphens", svc.Slug))
			return
		}
	}
	keys := map[string]string{}
	for _, ns := range in.Namespaces {
		if _, err := s.claims.Provision(ctx, ns, claims.ServiceSpec{}); err != nil {
			s.writeErr(w, r, err)
			return
		}
	}
	for _, svc := range in.Services {
		key, err := s.claims.Provision(ctx, svc.Owner, claims.ServiceSpec{Slug: svc.Slug, Name: svc.Name, Endpoint: svc.ServiceEndpoint})
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		keys[svc.Slug] = key
	}
	records := make([]claims.Record, 0, len(in.Claims))
	for _, c := range in.Claims {
		if c.Status == "" {
			c.Status = StatusApproved
		}
		if !claims.ValidStatus(c.Status) {
			apierror.Write(w, r, web.Validation("claim status %q is not a claim status", c.Status))
			return
		}
		if e := web.NamespaceProblem(c.Namespace); e != nil {
			apierror.Write(w, r, e)
			return
		}
		pub, err := identity.ParsePublicKey(c.PublicKey)
		if err != nil || c.Service == "" {
			apierror.Write(w, r, web.Validation("each claim needs a service and an ed25519:<base64> public_key"))
			return
		}
		stored, err := s.claims.Seed(ctx, Claim{Namespace: c.Namespace, Service: c.Service,
			PublicKey: identity.FormatPublicKey(pub), Status: c.Status})
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		records = append(records, claims.RecordOf(stored))
	}
	sessions := map[string]string{}
	for _, ns := range owners {
		if seen[ns] {
			continue
		}
		seen[ns] = true
		tok, _, err := s.IssueSession(ctx, ns)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		sessions[ns] = tok
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"api_keys": keys, "sessions": sessions, "claims": records})
}
