package ownerauth

import (
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/http"

	"github.com/idnhq/idn/apierror"
)

// Owner admits requests carrying a live session cookie and passes the
// owner's namespace on (it is a web.Owner). Mutating requests must also
// come from an allowed browser origin (or from no browser at all).
func (s *Sessions) Owner(next web.OwnerHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !s.kit.OriginAllowed(r) {
			apierror.Write(w, r, web.ErrOriginForbidden)
			return
		}
		token := s.Token(r)
		if token == "" {
			apierror.Write(w, r, web.ErrUnauthenticated)
			return
		}
		ns, err := s.Check(r.Context(), token)
		if err != nil {
			s.kit.Error(w, r, answer(err))
			return
		}
		s.kit.AdmitBody(r)
		next(w, r, ns)
	})
}
