package controlplane

import (
	"errors"
	"github.com/idnhq/idn/controlplane/internal/signed"
	"net/http"
	"strings"

	"github.com/idnhq/idn/internal/apierror"
)

// Defaults of the signed routes' admission limits (Config).
const (
	// DefaultSignedRatePerMinute is CONTROLPLANE_SIGNED_RATE_LIMIT_PER_MINUTE's
	// default: requests to the signed routes per client network per minute.
	DefaultSignedRatePerMinute = signed.DefaultSignedRatePerMinute
	// DefaultMaxLookupNonces is CONTROLPLANE_LOOKUP_NONCE_MAX_ENTRIES's
	// default: nonces of public lookups remembered in memory.
	DefaultMaxLookupNonces = signed.DefaultMaxLookupNonces
)

// signedService admits, like signed.Gate.Public, the routes that also need the service API key of
// the Authorization bearer header; the key is checked before the nonce is
// recorded (in the database) and before the body is read.
func (s *Server) signedService(next func(http.ResponseWriter, *http.Request, service)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, ok := s.gate.Verify(w, r)
		if !ok {
			return
		}
		svc, ok := s.serviceKey(w, r)
		if ok && s.gate.RecordNonce(w, r, caller) && s.gate.ReadBody(w, r, caller) {
			next(w, r, svc)
		}
	})
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
