package claims

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/web"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/didresolve"
	"github.com/idnhq/idn/identity"
)

// resolved is what the DID endpoints need about a namespace.
type resolved struct {
	rec    namespaceRecord
	claims []Claim // every claim, oldest first
}

func (s *Store) lookupDID(ctx context.Context, ns string) (resolved, error) {
	rec, err := s.namespace(ctx, ns)
	if err != nil {
		return resolved{}, err
	}
	claims, err := s.namespaceClaims(ctx, ns, false)
	return resolved{rec: rec, claims: claims}, err
}

// document builds the W3C document and its metadata. Keys are the approved
// claims' keys; services are their distinct slugs. "updated" is the last
// change to the namespace or to an approval.
func (s *Core) document(r *http.Request, res resolved) (*didresolve.Document, didresolve.DocumentMetadata) {
	ns := res.rec.Namespace
	meta := didresolve.DocumentMetadata{Created: web.Timestamp(res.rec.CreatedAt), Deactivated: !res.rec.Deactivated.IsZero()}
	updated := res.rec.UpdatedAt
	var keys []ed25519.PublicKey
	var endpoints []didresolve.Endpoint
	seenSvc := map[string]bool{}
	for _, c := range res.claims {
		if c.ApprovedAt.After(updated) {
			updated = c.ApprovedAt
		}
		if c.RevokedAt.After(updated) {
			updated = c.RevokedAt
		}
		if c.Status != StatusApproved || meta.Deactivated {
			continue
		}
		if k, err := identity.ParsePublicKey(c.PublicKey); err == nil {
			keys = append(keys, k)
		}
		if !seenSvc[c.Service] {
			seenSvc[c.Service] = true
			endpoints = append(endpoints, didresolve.Endpoint{Service: c.Service, URL: s.kit.Origin(r) + s.kit.Base + "/v1/verify?" +
				url.Values{"namespace": {ns}, "service": {c.Service}}.Encode()})
		}
	}
	meta.Updated = web.Timestamp(updated)
	return didresolve.NewDocument(ns, keys, endpoints), meta
}

// resolveDID is GET /1.0/identifiers/{did}: the DID Resolution envelope,
// with errors in didResolutionMetadata.
func (s *Core) resolveDID(w http.ResponseWriter, r *http.Request) {
	out := didresolve.Result{Context: didresolve.ContextResolution}
	status := http.StatusOK
	ns, err := didresolve.ParseDID(r.PathValue("did"))
	var res resolved
	if err == nil {
		res, err = s.store.lookupDID(r.Context(), ns)
	}
	switch {
	case errors.Is(err, didresolve.ErrInvalidDID):
		status, out.ResolutionMetadata.Error = http.StatusBadRequest, "invalidDid"
	case errors.Is(err, errNamespaceNotFound):
		status, out.ResolutionMetadata.Error = http.StatusNotFound, "notFound"
	case err != nil:
		s.kit.Log.ErrorContext(r.Context(), "resolve DID", "err", err)
		status, out.ResolutionMetadata.Error = http.StatusInternalServerError, "internalError"
	default:
		out.Document, out.DocumentMetadata = s.document(r, res)
		out.ResolutionMetadata.ContentType = didresolve.MediaTypeDIDLDJSON
		if out.DocumentMetadata.Deactivated {
			status = http.StatusGone
		}
	}
	w.Header().Set("Content-Type", didresolve.MediaTypeResolution)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(out)
}

// wellKnownDID is GET /.well-known/did/{did}: the bare document, negotiated
// between application/did+json (default), application/did+ld+json and
// application/json. A deactivated DID answers 410 with its empty document.
func (s *Core) wellKnownDID(w http.ResponseWriter, r *http.Request) {
	ns, err := didresolve.ParseDID(r.PathValue("did"))
	if err != nil {
		apierror.Write(w, r, errInvalidDID)
		return
	}
	ct, ok := negotiate(r.Header.Get("Accept"))
	if !ok {
		apierror.Write(w, r, errNotAcceptable)
		return
	}
	res, err := s.store.lookupDID(r.Context(), ns)
	if errors.Is(err, errNamespaceNotFound) {
		apierror.Write(w, r, errDIDNotFound)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	doc, meta := s.document(r, res)
	status := http.StatusOK
	if meta.Deactivated {
		status = http.StatusGone
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Vary", "Accept")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(doc)
}

// didTypes are the document media types in server preference order.
var didTypes = []string{didresolve.MediaTypeDIDJSON, didresolve.MediaTypeDIDLDJSON, "application/json"}

// negotiate picks the document media type for an Accept header (RFC 9110
// §12.5.1): the highest q among the supported types, each weighed by its
// most specific matching range; ties go to the server's preference. An
// empty header accepts anything.
func negotiate(accept string) (string, bool) {
	if strings.TrimSpace(accept) == "" {
		return didTypes[0], true
	}
	best, bestQ := "", 0.0
	for _, typ := range didTypes {
		q, spec := 0.0, -1
		for _, rng := range strings.Split(accept, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(rng))
			if err != nil {
				continue
			}
			rq := 1.0
			if v, ok := params["q"]; ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || f < 0 || f > 1 {
					continue
				}
				rq = f
			}
			s := -1
			switch {
			case mt == typ:
				s = 2
			case mt == "application/*":
				s = 1
			case mt == "*/*":
				s = 0
			}
			if s > spec {
				q, spec = rq, s
			}
		}
		if q > bestQ {
			best, bestQ = typ, q
		}
	}
	return best, best != ""
}

// apiVerificationMethod is one claimed key of the owner's API form of the
// DID document. The DID context makes "service" an IRI, so it names the
// service entry of the public document; the slug is "service_slug".
type apiVerificationMethod struct {
	ID              string `json:"id"`
	Type            string `json:"type"`
	PublicKeyBase64 string `json:"publicKeyBase64"`
	Service         string `json:"service"`
	ServiceSlug     string `json:"service_slug"`
	Status          string `json:"status"`
	ClaimID         string `json:"claim_id"`
}

// ownerDID is GET /v1/namespaces/{namespace}/did: the owner's API form,
// listing every claimed key with its service and status. Ids are keyIds
// (stable), as in the W3C form.
func (s *Core) ownerDID(w http.ResponseWriter, r *http.Request, owner string) {
	ns, ok := web.OwnNamespace(w, r, owner)
	if !ok {
		return
	}
	res, err := s.store.lookupDID(r.Context(), ns)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	_, meta := s.document(r, res)
	vms := make([]apiVerificationMethod, 0, len(res.claims))
	for _, c := range res.claims {
		k, err := identity.ParsePublicKey(c.PublicKey)
		if err != nil {
			continue
		}
		vms = append(vms, apiVerificationMethod{ID: identity.KeyID(ns, k), Type: didresolve.KeyType,
			PublicKeyBase64: base64.StdEncoding.EncodeToString(k), Service: didresolve.ServiceID(identity.DID(ns), c.Service), ServiceSlug: c.Service, Status: c.Status, ClaimID: c.ID})
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{
		"@context":           didresolve.Context(),
		"id":                 identity.DID(ns),
		"controller":         identity.DID(ns),
		"created":            meta.Created,
		"updated":            meta.Updated,
		"deactivated":        meta.Deactivated,
		"verificationMethod": vms,
	})
}
