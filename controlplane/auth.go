package controlplane

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/apierror"
)

// owner admits requests carrying a live idn_session cookie and passes the
// owner's namespace on. Mutating requests must also come from an allowed
// browser origin (or from no browser at all).
func (s *Server) owner(next func(http.ResponseWriter, *http.Request, string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !s.originAllowed(r) {
			apierror.Write(w, r, errOriginForbidden)
			return
		}
		c, err := r.Cookie(SessionCookie)
		if err != nil || c.Value == "" {
			apierror.Write(w, r, errUnauthenticated)
			return
		}
		ns, err := s.session(r.Context(), c.Value)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		s.admitBody(r)
		next(w, r, ns)
	})
}

// ownNamespace returns the {namespace} path value when the session's owner
// owns it; otherwise it answers 400 or 403 and returns false.
func ownNamespace(w http.ResponseWriter, r *http.Request, owner string) (string, bool) {
	ns := r.PathValue("namespace")
	if identity.ValidNamespace(ns) != nil {
		apierror.Write(w, r, errInvalidNamespace)
		return "", false
	}
	if ns != owner {
		apierror.Write(w, r, errNamespaceForbid)
		return "", false
	}
	return ns, true
}

// originAllowed implements the cross-site check of mutating session routes.
func (s *Server) originAllowed(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return false
	}
	origin := r.Header.Get("Origin")
	return origin == "" || s.originListed(origin)
}

func (s *Server) originListed(origin string) bool {
	for _, o := range s.cfg.AllowedOrigins {
		if strings.EqualFold(o, origin) {
			return true
		}
	}
	return false
}

// validOrigin reports whether o is exactly scheme://host[:port] with an
// http or https scheme.
func validOrigin(o string) bool {
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.User == nil && u.Path == "" && u.RawQuery == "" && u.Fragment == "" && !strings.HasSuffix(o, "?") && !strings.HasSuffix(o, "#")
}
