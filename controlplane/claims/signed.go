package claims

import (
	"errors"
	"net/http"
	"strings"

	"github.com/idnhq/idn/internal/apierror"
)

// signedService admits, like signed.Gate.Public, the routes that also need the service API key of
// the Authorization bearer header; the key is checked before the nonce is
// recorded (in the database) and before the body is read.
func (s *Core) signedService(next func(http.ResponseWriter, *http.Request, Service)) http.Handler {
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
func (s *Core) serviceKey(w http.ResponseWriter, r *http.Request) (Service, bool) {
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !strings.HasPrefix(key, apiKeyPrefix) {
		apierror.Write(w, r, errAPIKeyInvalid)
		return Service{}, false
	}
	svc, err := s.store.serviceByKey(r.Context(), key, s.kit.Now())
	if errors.Is(err, errKeyNotFound) {
		apierror.Write(w, r, errAPIKeyInvalid)
		return Service{}, false
	}
	if err != nil {
		s.fail(w, r, err)
		return Service{}, false
	}
	return svc, true
}
