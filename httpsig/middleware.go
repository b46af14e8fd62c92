package httpsig

import (
	"context"
	"net/http"
)

type verifiedKey struct{}

// Middleware verifies each request before next.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ver, err := v.VerifyRequest(r)
		if err != nil {
			http.Error(w, Code(err), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verifiedKey{}, ver)))
	})
}

// FromContext returns the *Verified stored by Middleware.
func FromContext(ctx context.Context) (*Verified, bool) {
	v, ok := ctx.Value(verifiedKey{}).(*Verified)
	return v, ok
}
