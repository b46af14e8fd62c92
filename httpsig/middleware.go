package httpsig

import (
	"context"
	"net/http"
)

type verifiedKey struct{}

// Middleware verifies every request before passing it to next, with the
// *Verified stored in the request context (see FromContext). Rejected
// requests go to v.ErrorHandler.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ver, err := v.VerifyRequest(r)
		if err != nil {
			if v.ErrorHandler != nil {
				v.ErrorHandler(w, r, err)
			} else {
				writeError(w, r, err)
			}
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verifiedKey{}, ver)))
	})
}

// FromContext returns the *Verified that Middleware stored in ctx.
func FromContext(ctx context.Context) (*Verified, bool) {
	v, ok := ctx.Value(verifiedKey{}).(*Verified)
	return v, ok && v != nil
}

// writeError is the default ErrorHandler. The answer names only the kind of
// failure: the detail may describe the key or the signature base, which is
// for the server's logs.
func writeError(w http.ResponseWriter, _ *http.Request, err error) {
	switch kind := kindOf(err); kind {
	case nil:
		http.Error(w, "httpsig: signature verification could not be completed", http.StatusInternalServerError)
	case ErrBodyTooLarge:
		http.Error(w, kind.Error(), http.StatusRequestEntityTooLarge)
	default:
		http.Error(w, kind.Error(), http.StatusForbidden)
	}
}
