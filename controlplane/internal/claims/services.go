package claims

import (
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/controlplane/internal/webhooks"
	"net/http"
	"net/url"
	"strings"

	"github.com/idnhq/idn/apierror"
)

// validSlug: 3-64 of a-z 0-9 -, alphanumeric at both ends.
func ValidSlug(s string) bool {
	if len(s) < 3 || len(s) > 64 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// slugFromName lower-cases name, turns every run of other characters into
// one hyphen and trims to 64; the result may still be invalid (too short).
func slugFromName(name string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(name) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	s := b.String()
	if len(s) > 64 {
		s = s[:64]
	}
	return strings.Trim(s, "-")
}

func validName(name string) *apierror.Error {
	if strings.TrimSpace(name) == "" {
		return web.Validation("name is required: 1 to 200 characters without control characters")
	}
	return web.CheckDisplay("name", name, 200)
}

func validEndpoint(u string) *apierror.Error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" || p.User != nil || len(u) > 2048 {
		return web.Validation("service_endpoint must be an absolute http or https URL without credentials")
	}
	return web.CheckDisplay("service_endpoint", u, 2048)
}

type serviceRequest struct {
	Name            *string `json:"name"`
	ServiceEndpoint *string `json:"service_endpoint"`
	Slug            *string `json:"slug"`
}

func (s *Core) createService(w http.ResponseWriter, r *http.Request, owner string) {
	var in serviceRequest
	if e := s.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	if in.Name == nil {
		apierror.Write(w, r, web.Validation("name is required"))
		return
	}
	if e := validName(*in.Name); e != nil {
		apierror.Write(w, r, e)
		return
	}
	if in.ServiceEndpoint == nil {
		apierror.Write(w, r, web.Validation("service_endpoint is required"))
		return
	}
	if e := validEndpoint(*in.ServiceEndpoint); e != nil {
		apierror.Write(w, r, e)
		return
	}
	slug := slugFromName(*in.Name)
	if in.Slug != nil {
		slug = *in.Slug
	}
	if !ValidSlug(slug) {
		apierror.Write(w, r, web.Validation("slug must be 3-64 characters of a-z, 0-9 and inner hyphens (derived from name when absent)"))
		return
	}
	svc, key, err := s.store.createService(r.Context(), owner, *in.Name, *in.ServiceEndpoint, slug, s.cfg.MaxServices, s.kit.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusCreated, map[string]any{"service": svc, "api_key": key})
}

func (s *Core) listServices(w http.ResponseWriter, r *http.Request, owner string) {
	list, err := s.store.listServices(r.Context(), owner)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"services": list})
}

func (s *Core) getService(w http.ResponseWriter, r *http.Request, owner string) {
	svc, err := s.store.service(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, svc)
}

// updateService changes name and/or service_endpoint. The slug is part of
// every claim tuple of the service, so it cannot change.
func (s *Core) updateService(w http.ResponseWriter, r *http.Request, owner string) {
	var in serviceRequest
	if e := s.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	if in.Slug != nil {
		apierror.Write(w, r, web.Validation("slug cannot be changed"))
		return
	}
	if in.Name == nil && in.ServiceEndpoint == nil {
		apierror.Write(w, r, web.Validation("nothing to update: give name and/or service_endpoint"))
		return
	}
	if in.Name != nil {
		if e := validName(*in.Name); e != nil {
			apierror.Write(w, r, e)
			return
		}
	}
	if in.ServiceEndpoint != nil {
		if e := validEndpoint(*in.ServiceEndpoint); e != nil {
			apierror.Write(w, r, e)
			return
		}
	}
	svc, err := s.store.updateService(r.Context(), owner, r.PathValue("id"), in.Name, in.ServiceEndpoint, s.kit.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, svc)
}

func (s *Core) deleteService(w http.ResponseWriter, r *http.Request, owner string) {
	revoked, rejected, err := s.store.deleteService(r.Context(), owner, r.PathValue("id"), s.kit.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, c := range revoked {
		s.publish(r.Context(), webhooks.EventRevoked, c)
	}
	for _, c := range rejected {
		s.publish(r.Context(), webhooks.EventRejected, c)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Core) listKeys(w http.ResponseWriter, r *http.Request, owner string) {
	keys, err := s.store.listKeys(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"api_keys": keys})
}

func (s *Core) createKey(w http.ResponseWriter, r *http.Request, owner string) {
	key, err := s.store.createKey(r.Context(), owner, r.PathValue("id"), s.cfg.MaxAPIKeys, s.kit.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusCreated, map[string]any{"api_key": key})
}

func (s *Core) revokeKey(w http.ResponseWriter, r *http.Request, owner string) {
	if err := s.store.revokeKey(r.Context(), owner, r.PathValue("id"), r.PathValue("keyID"), s.kit.Now()); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
