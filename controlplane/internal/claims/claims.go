package claims

import (
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/controlplane/internal/webhooks"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/identity"
)

// page bounds of the two claim listings: the gateway's feed reads large
// pages, an owner's browser small ones.
const (
	feedDefaultLimit  = 500
	feedMaxLimit      = 2000
	ownerDefaultLimit = 50
	ownerMaxLimit     = 200
)

func (s *Core) getNamespace(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("namespace")
	if identity.ValidNamespace(ns) != nil {
		apierror.Write(w, r, web.ErrInvalidNamespace)
		return
	}
	rec, err := s.store.namespace(r.Context(), ns)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{
		"did":           identity.DID(ns),
		"namespace":     ns,
		"owner":         rec.Owner,
		"created_at":    web.Timestamp(rec.CreatedAt),
		"active":        rec.Deactivated.IsZero(),
		"active_claims": rec.ActiveClaims,
	})
}

// Record is a claim as its owner (and its submitting service) sees it.
type Record struct {
	ClaimID          string `json:"claim_id"`
	Namespace        string `json:"namespace"`
	Service          string `json:"service"`
	PublicKey        string `json:"public_key"`
	AgentIP          string `json:"agent_ip"`
	Status           string `json:"status"`
	CreatedAt        string `json:"created_at"`
	ApprovedAt       string `json:"approved_at,omitempty"`
	RejectedAt       string `json:"rejected_at,omitempty"`
	RevokedAt        string `json:"revoked_at,omitempty"`
	ExpiredAt        string `json:"expired_at,omitempty"`
	ApprovalTxHash   string `json:"approval_tx_hash,omitempty"`
	RevocationTxHash string `json:"revocation_tx_hash,omitempty"`
	RegistryError    string `json:"registry_error,omitempty"`
	Subject          string `json:"subject,omitempty"`
	AgentID          string `json:"agent_id,omitempty"`
	AgentName        string `json:"agent_name,omitempty"`
}

// RecordOf is c as its JSON record.
func RecordOf(c Claim) Record {
	return Record{
		ClaimID: c.ID, Namespace: c.Namespace, Service: c.Service, PublicKey: c.PublicKey, AgentIP: c.AgentIP,
		Status: c.Status, CreatedAt: web.Timestamp(c.CreatedAt), ApprovedAt: web.Timestamp(c.ApprovedAt),
		RejectedAt: web.Timestamp(c.RejectedAt), RevokedAt: web.Timestamp(c.RevokedAt), ExpiredAt: web.Timestamp(c.ExpiredAt),
		ApprovalTxHash: c.ApprovalTxHash, RevocationTxHash: c.RevocationTxHash, RegistryError: c.RegistryError,
		Subject: c.Subject, AgentID: c.AgentID, AgentName: c.AgentName,
	}
}

type pagination struct {
	Limit   int   `json:"limit"`
	Offset  int   `json:"offset"`
	Total   int64 `json:"total"`
	HasMore bool  `json:"has_more"`
	// The owner listing's cursors: the after= of the next page and the
	// before= of the previous one, when there is one.
	NextAfter  string `json:"next_after,omitempty"`
	PrevBefore string `json:"prev_before,omitempty"`
}

// pageParams reads limit and offset: limit in [1, max] (def when absent),
// offset ≥ 0.
func pageParams(q map[string][]string, def, max int) (limit, offset int, e *apierror.Error) {
	limit, offset = def, 0
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > max {
			return 0, 0, web.Validation("limit must be an integer from 1 to %d", max)
		}
		limit = n
	}
	if v, ok := q["offset"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 0 {
			return 0, 0, web.Validation("offset must be a non-negative integer")
		}
		offset = n
	}
	return limit, offset, nil
}

// etagMatch implements the weak comparison of If-None-Match (RFC 9110
// §13.1.2): a list of entity tags or "*".
func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// submitRequest is the body of POST /v1/claims. Nonce is accepted for
// compatibility with deployed gateways; replay protection comes from the
// signed headers.
type submitRequest struct {
	Namespace string `json:"namespace"`
	PublicKey string `json:"public_key"`
	Service   string `json:"service"`
	AgentIP   string `json:"agent_ip"`
	Subject   string `json:"subject"`
	AgentID   string `json:"agent_id"`
	AgentName string `json:"agent_name"`
	Nonce     string `json:"nonce"`
}

// validate checks the body and returns the claim it asks for, with the
// public key normalised to "ed25519:<base64>".
func (in submitRequest) validate() (Claim, *apierror.Error) {
	if identity.ValidNamespace(in.Namespace) != nil {
		return Claim{}, web.ErrInvalidNamespace
	}
	pub, err := identity.ParsePublicKey(in.PublicKey)
	if err != nil {
		return Claim{}, web.Validation("public_key must be ed25519:<base64> or a multibase Ed25519 key")
	}
	if in.Service == "" {
		return Claim{}, web.Validation("service is required")
	}
	if in.AgentIP != "" {
		if _, err := netip.ParseAddr(in.AgentIP); err != nil {
			return Claim{}, web.Validation("agent_ip must be an IP address")
		}
	}
	// Shown beside Approve: no U+202E or other character that hides or
	// reorders what the owner reads.
	for _, f := range []struct{ name, v string }{{"subject", in.Subject}, {"agent_id", in.AgentID}, {"agent_name", in.AgentName}, {"nonce", in.Nonce}} {
		if e := web.CheckDisplay(f.name, f.v, 256); e != nil {
			return Claim{}, e
		}
	}
	return Claim{Namespace: in.Namespace, PublicKey: identity.FormatPublicKey(pub), Service: in.Service,
		AgentIP: in.AgentIP, Subject: in.Subject, AgentID: in.AgentID, AgentName: in.AgentName}, nil
}

func (s *Core) submitClaim(w http.ResponseWriter, r *http.Request, st standing) {
	var in submitRequest
	if e := s.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	c, e := in.validate()
	if e != nil {
		apierror.Write(w, r, e)
		return
	}
	if _, ok := s.admit.service(w, r, st, c.Service); !ok {
		return
	}
	if c.AgentIP == "" {
		c.AgentIP = s.kit.Proxy.ClientAddr(r).String()
	}
	now := s.kit.Now()
	budget := pendingBudget{perService: s.cfg.MaxPendingClaims, perAgent: s.cfg.MaxPendingPerAgent}
	c, created, err := s.store.submitClaim(r.Context(), c, budget, now.Add(-s.cfg.PendingExpiry), now)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		s.publish(r.Context(), webhooks.EventSubmitted, c)
	}
	apierror.WriteJSON(w, status, RecordOf(c))
}

var actionEvents = map[string]string{"approve": webhooks.EventApproved, "reject": webhooks.EventRejected, "revoke": webhooks.EventRevoked}

// moveClaim is POST /v1/claims/{id}/{approve|reject|revoke}.
func (s *Core) moveClaim(w http.ResponseWriter, r *http.Request, ns string) {
	action := r.PathValue("action")
	event, ok := actionEvents[action]
	if !ok {
		apierror.Write(w, r, web.ErrNotFound)
		return
	}
	now := s.kit.Now()
	c, err := s.applyClaimAction(r.Context(), ns, r.PathValue("id"), action, now)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, RecordOf(s.publish(r.Context(), event, c)))
}

// rejectPending is POST /v1/namespaces/{namespace}/claims/reject-pending
// ?service=<slug>: the owner's answer to a flood of claims through one
// service. Each claim moves as a single reject would (request.rejected
// webhook and event); the answer is how many moved.
func (s *Core) rejectPending(w http.ResponseWriter, r *http.Request, owner string) {
	ns, ok := web.OwnNamespace(w, r, owner)
	if !ok {
		return
	}
	slug := r.URL.Query().Get("service")
	if !ValidSlug(slug) {
		apierror.Write(w, r, web.Validation("service must be the slug of the service whose pending claims to reject"))
		return
	}
	now := s.kit.Now()
	claims, err := s.store.rejectPending(r.Context(), ns, slug, now.Add(-s.cfg.PendingExpiry), now)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, c := range claims {
		s.publish(r.Context(), webhooks.EventRejected, c)
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"namespace": ns, "service": slug, "rejected": len(claims)})
}

var claimStatuses = map[string]bool{StatusPending: true, StatusApproved: true, StatusRevoked: true, StatusRejected: true, StatusExpired: true}

// ownerClaims is GET /v1/namespaces/{namespace}/claims.
func (s *Core) ownerClaims(w http.ResponseWriter, r *http.Request, owner string) {
	ns, ok := web.OwnNamespace(w, r, owner)
	if !ok {
		return
	}
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !claimStatuses[status] {
		apierror.Write(w, r, web.Validation("status must be one of pending, approved, revoked, rejected, expired"))
		return
	}
	limit, offset, e := pageParams(q, ownerDefaultLimit, ownerMaxLimit)
	if e != nil {
		apierror.Write(w, r, e)
		return
	}
	cur := Cursor{After: q.Get("after"), Before: q.Get("before"), Offset: offset}
	if len(slices.DeleteFunc([]string{"after", "before", "offset"}, func(k string) bool { return !q.Has(k) })) > 1 {
		apierror.Write(w, r, web.Validation("after, before and offset exclude each other"))
		return
	}
	p, err := s.store.ownerClaims(r.Context(), ns, status, q.Get("service"), limit, cur)
	if err == ErrClaimNotFound {
		apierror.Write(w, r, web.Validation("after and before must be the claim_id of a claim of the namespace"))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	recs := make([]Record, len(p.Claims))
	for i, c := range p.Claims {
		recs[i] = RecordOf(c)
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{
		"claims":     recs,
		"pagination": ownerPagination(p, limit, offset),
	})
}

// ownerPagination is the pagination of a page of the owner listing, with
// the cursors of its neighbours.
func ownerPagination(p Page, limit, offset int) pagination {
	pg := pagination{Limit: limit, Offset: offset, Total: p.Total, HasMore: p.HasMore}
	if n := len(p.Claims); n > 0 {
		if p.HasMore {
			pg.NextAfter = p.Claims[n-1].ID
		}
		if p.HasNewer {
			pg.PrevBefore = p.Claims[0].ID
		}
	}
	return pg
}

// verifyClaim is GET /v1/verify?namespace&public_key&service: is the agent
// key authorised for the service? service defaults to the key's service
// and must equal it; a paired gateway names one of its owner's.
func (s *Core) verifyClaim(w http.ResponseWriter, r *http.Request, st standing) {
	q := r.URL.Query()
	svc, ok := s.admit.service(w, r, st, q.Get("service"))
	if !ok {
		return
	}
	slug := svc.Slug
	ns := q.Get("namespace")
	if identity.ValidNamespace(ns) != nil {
		apierror.Write(w, r, web.ErrInvalidNamespace)
		return
	}
	pub, err := identity.ParsePublicKey(q.Get("public_key"))
	if err != nil {
		apierror.Write(w, r, web.Validation("public_key must be ed25519:<base64> or a multibase Ed25519 key"))
		return
	}
	c, err := s.store.latestClaim(r.Context(), ns, identity.FormatPublicKey(pub), slug)
	if err == ErrClaimNotFound {
		apierror.WriteJSON(w, http.StatusOK, map[string]any{"authorized": false})
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := map[string]any{"authorized": c.Status == StatusApproved, "claim_id": c.ID, "status": c.Status}
	if c.Status == StatusApproved {
		out["approved_at"] = web.Timestamp(c.ApprovedAt)
	}
	apierror.WriteJSON(w, http.StatusOK, out)
}
