package controlplane

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/apierror"
)

// signed admits only requests that verify under the idn-rfc9421-v1 profile,
// recording their nonce in the shared database. The signature covers
// content-digest, so it is checked before any body byte is read; the body
// is then read and checked against that digest before next runs.
func (s *Server) signed(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, ok := s.verifySigned(w, r)
		if ok && s.readSignedBody(w, r, caller) {
			next(w, r)
		}
	})
}

// signedService is signed for routes that also need the service API key of
// the Authorization bearer header; the key is checked before the body is
// read too.
func (s *Server) signedService(next func(http.ResponseWriter, *http.Request, service)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, ok := s.verifySigned(w, r)
		if !ok {
			return
		}
		svc, ok := s.serviceKey(w, r)
		if ok && s.readSignedBody(w, r, caller) {
			next(w, r, svc)
		}
	})
}

// verifySigned checks the signature and records the nonce, reading no body
// byte; on failure it has answered.
func (s *Server) verifySigned(w http.ResponseWriter, r *http.Request) (*identity.Caller, bool) {
	caller, err := s.verifier.Verify(r)
	if err != nil {
		s.signatureFailed(w, r, err)
		return nil, false
	}
	return caller, true
}

func (s *Server) signatureFailed(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, httpsig.ErrReplayDetected):
		apierror.Write(w, r, errNonceReplay)
	case errors.Is(err, ErrUnavailable):
		s.writeErr(w, r, err)
	default:
		var reason string
		if code, ok := identity.AuthCode(err); ok {
			reason = code.String()
		}
		apierror.Write(w, r, errSignatureInvalid.With("details", map[string]string{"reason": reason}))
	}
}

// serviceKey authenticates the service API key of the Authorization bearer
// header; on failure it has answered.
func (s *Server) serviceKey(w http.ResponseWriter, r *http.Request) (service, bool) {
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !strings.HasPrefix(key, apiKeyPrefix) {
		apierror.Write(w, r, errAPIKeyInvalid)
		return service{}, false
	}
	svc, err := s.store.serviceByKey(r.Context(), key, s.now())
	if errors.Is(err, errKeyNotFound) {
		apierror.Write(w, r, errAPIKeyInvalid)
		return service{}, false
	}
	if err != nil {
		s.writeErr(w, r, err)
		return service{}, false
	}
	return svc, true
}

// readSignedBody reads the body of a verified caller (up to MaxBodyBytes,
// into a buffer that grows as bytes arrive), checks it against the signed
// content-digest and leaves r.Body readable from the start; on failure it
// has answered.
func (s *Server) readSignedBody(w http.ResponseWriter, r *http.Request, caller *identity.Caller) bool {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		s.admitBody(r)
		if r.ContentLength > s.bodyLimit(r) {
			apierror.Write(w, r, errBodyTooLarge)
			return false
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			if e := bodyError(err); e != nil {
				apierror.Write(w, r, e)
			} else {
				apierror.Write(w, r, validationError("request body could not be read"))
			}
			return false
		}
		body = b
	}
	if err := caller.CheckBody(body); err != nil {
		s.signatureFailed(w, r, err)
		return false
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return true
}
