package controlplane

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/apierror"
	"github.com/idnhq/idn/replay"
)

// Signed routes admit a request in this order, so that a caller who proves
// nothing (any self-made key can sign) makes the control plane write
// nothing:
//
//  1. the client network (an IPv4 address, or an IPv6 /64) spends a token
//     of its bucket (SignedRatePerMinute), in memory: past it 429
//     RATE_LIMITED with Retry-After. Anyone can make a valid signature
//     with a key of their own, so verifying one first would protect
//     nothing and cost a flood's every request two Ed25519 verifications;
//  2. the signature and the agent certificate are verified, in memory;
//  3. the caller's standing is read where the route needs one (a service
//     API key, a paired gateway key or an open pairing session);
//  4. the nonce is recorded: in the database for callers with standing, so
//     instances sharing it refuse each other's replays; in a bounded memory
//     (MaxLookupNonces) for the public lookups, which write nothing and
//     need no standing;
//  5. the body is read and checked against the signed content-digest.

// signed admits the public lookups: any verified signer, its nonce kept in
// memory. The signature covers content-digest, so it is checked before any
// body byte is read; the body is then read and checked against that digest
// before next runs.
func (s *Server) signed(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, ok := s.verifySigned(w, r)
		if ok && s.recordNonce(w, r, caller, s.lookupNonces) && s.readSignedBody(w, r, caller) {
			next(w, r)
		}
	})
}

// signedService is signed for routes that also need the service API key of
// the Authorization bearer header; the key is checked before the nonce is
// recorded (in the database) and before the body is read.
func (s *Server) signedService(next func(http.ResponseWriter, *http.Request, service)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, ok := s.verifySigned(w, r)
		if !ok {
			return
		}
		svc, ok := s.serviceKey(w, r)
		if ok && s.recordNonce(w, r, caller, s.nonces) && s.readSignedBody(w, r, caller) {
			next(w, r, svc)
		}
	})
}

// verifySigned checks the client's rate and the signature, touching
// neither the body nor the database and recording no nonce; on failure it
// has answered.
func (s *Server) verifySigned(w http.ResponseWriter, r *http.Request) (*identity.Caller, bool) {
	if wait := s.signedLimits.wait(s.clientKey(r), s.now()); wait > 0 {
		apierror.Write(w, r, rateLimited(wait))
		return nil, false
	}
	caller, err := s.verifier.Verify(r)
	if err != nil {
		s.signatureFailed(w, r, err)
		return nil, false
	}
	return caller, true
}

// recordNonce records the caller's nonce, scoped by its namespace, in
// nonces; on failure (a replay, a full memory, the database failing) it has
// answered.
func (s *Server) recordNonce(w http.ResponseWriter, r *http.Request, caller *identity.Caller, nonces httpsig.NonceChecker) bool {
	err := nonces.CheckNonce(r.Context(), caller.Namespace, caller.Nonce, caller.NonceUntil)
	switch {
	case err == nil:
		return true
	case errors.Is(err, replay.ErrFull):
		// A slot frees the second its nonce expires; come back shortly.
		apierror.Write(w, r, errNonceStoreFull.WithRetryAfter(5*time.Second))
	default:
		s.signatureFailed(w, r, err)
	}
	return false
}

// signatureFailed answers a failed verification or nonce check with the
// code the gateway answers the same failure with (identity.AuthCode);
// anything else, such as the database failing, through writeErr.
func (s *Server) signatureFailed(w http.ResponseWriter, r *http.Request, err error) {
	if code, ok := identity.AuthCode(err); ok {
		apierror.Write(w, r, apierror.Coded(code, ""))
		return
	}
	s.writeErr(w, r, err)
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
