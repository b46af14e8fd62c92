package controlplane

import (
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/http"

	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/apierror"
)

// owner admits requests carrying a live idn_session cookie and passes the
// owner's namespace on. Mutating requests must also come from an allowed
// browser origin (or from no browser at all).
func (s *Server) owner(next func(http.ResponseWriter, *http.Request, string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !s.kit.OriginAllowed(r) {
			apierror.Write(w, r, web.ErrOriginForbidden)
			return
		}
		c, err := r.Cookie(SessionCookie)
		if err != nil || c.Value == "" {
			apierror.Write(w, r, web.ErrUnauthenticated)
			return
		}
		ns, err := s.session(r.Context(), c.Value)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		s.kit.AdmitBody(r)
		next(w, r, ns)
	})
}

// ownNamespace returns the {namespace} path value when the session's owner
// owns it; otherwise it answers 400 or 403 and returns false.
func ownNamespace(w http.ResponseWriter, r *http.Request, owner string) (string, bool) {
	ns := r.PathValue("namespace")
	if identity.ValidNamespace(ns) != nil {
		apierror.Write(w, r, web.ErrInvalidNamespace)
		return "", false
	}
	if ns != owner {
		apierror.Write(w, r, web.ErrNamespaceForbidden)
		return "", false
	}
	return ns, true
}
