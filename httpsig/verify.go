package httpsig

import (
	"net/http"
	"time"
)

// Verifier checks signatures.
type Verifier struct {
	Keys                   KeyResolver  // nil: every signature is rejected
	Nonces                 NonceChecker // nil: rejected, unless InsecureSkipNonceCheck
	InsecureSkipNonceCheck bool
	Clock                  func() time.Time
	MaxAge                 time.Duration
	FutureSkew             time.Duration
	Label                  string
	Required               []Component
	AcceptLowercaseMethod  bool
	Origin                 func(r *http.Request) (scheme, authority string)
	MaxBodyBytes           int64
	ErrorHandler           func(w http.ResponseWriter, r *http.Request, err error)
}

// VerifyRequest verifies r.
func (v *Verifier) VerifyRequest(r *http.Request) (*Verified, error) {
	return nil, newError(ErrHeadersInvalid, "not implemented yet")
}

// VerifyResponse verifies resp.
func (v *Verifier) VerifyResponse(resp *http.Response, req *http.Request) (*Verified, error) {
	return nil, newError(ErrHeadersInvalid, "not implemented yet")
}
