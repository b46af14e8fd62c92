package httpsig

import (
	"context"
	"net/http"

	"github.com/idnhq/idn/internal/apierror"
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

// errorMessages are the client-facing messages of the default error
// handler; details stay out of responses.
var errorMessages = map[string]string{
	"AUTH_HEADERS_INVALID":           "signature headers are missing or malformed",
	"AUTH_SIGNATURE_INVALID":         "signature verification failed",
	"AUTH_SIGNED_COMPONENTS_INVALID": "signed components are invalid",
	"AUTH_IDENTITY_INVALID":          "signer identity is invalid",
	"AUTH_NONCE_INVALID":             "nonce is missing or malformed",
	"AUTH_REPLAY_DETECTED":           "nonce already used",
	"REQUEST_BODY_TOO_LARGE":         "request body too large",
}

func writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := Code(err)
	switch code {
	case "":
		apierror.Write(w, r, apierror.New(http.StatusInternalServerError, "INTERNAL_ERROR", "signature verification could not be completed"))
	case "REQUEST_BODY_TOO_LARGE":
		apierror.Write(w, r, apierror.New(http.StatusRequestEntityTooLarge, code, errorMessages[code]))
	default:
		apierror.Write(w, r, apierror.New(http.StatusForbidden, code, errorMessages[code]))
	}
}
