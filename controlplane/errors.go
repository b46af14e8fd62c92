package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/idnhq/idn/internal/apierror"
	"github.com/jackc/pgx/v5/pgconn"
)

// Domain errors returned by the store. The HTTP layer maps them to statuses
// and codes in errorTable, nowhere else.
var (
	errNamespaceNotFound    = errors.New("controlplane: namespace not found")
	errNamespaceDeactivated = errors.New("controlplane: namespace deactivated")
	errServiceNotFound      = errors.New("controlplane: service not found")
	errSlugTaken            = errors.New("controlplane: service slug already taken")
	errKeyNotFound          = errors.New("controlplane: api key not found")
	errKeyLimit             = errors.New("controlplane: api key limit reached")
	errClaimNotFound        = errors.New("controlplane: claim not found")
	errPendingLimit         = errors.New("controlplane: pending authorization limit reached")
	errAgentPendingLimit    = errors.New("controlplane: pending authorization limit of the agent address reached")
	errSessionInvalid       = errors.New("controlplane: session invalid")
)

// transitionError is a claim state move that the state machine forbids.
type transitionError struct {
	Action string // approve, reject, revoke
	From   string // the claim's current status
}

func (e *transitionError) Error() string {
	return fmt.Sprintf("controlplane: cannot %s a claim that is %s", e.Action, e.From)
}

// errorTable maps store sentinels to API errors.
var errorTable = []struct {
	err  error
	resp *apierror.Error
}{
	{errNamespaceNotFound, apierror.New(http.StatusNotFound, "NAMESPACE_NOT_FOUND", "namespace not found")},
	{errNamespaceDeactivated, apierror.New(http.StatusForbidden, "NAMESPACE_DEACTIVATED", "namespace is deactivated")},
	{errServiceNotFound, apierror.New(http.StatusNotFound, "SERVICE_NOT_FOUND", "service not found")},
	{errSlugTaken, apierror.New(http.StatusConflict, "SLUG_TAKEN", "service slug is already taken")},
	{errKeyNotFound, apierror.New(http.StatusNotFound, "API_KEY_NOT_FOUND", "api key not found")},
	{errKeyLimit, apierror.New(http.StatusConflict, "API_KEY_LIMIT_REACHED", "the service already has the maximum number of active api keys")},
	{errClaimNotFound, apierror.New(http.StatusNotFound, "CLAIM_NOT_FOUND", "claim not found")},
	{errPendingLimit, apierror.New(http.StatusTooManyRequests, "PENDING_LIMIT_REACHED", "the namespace has too many pending authorization requests for this service")},
	{errAgentPendingLimit, apierror.New(http.StatusTooManyRequests, "AGENT_PENDING_LIMIT_REACHED", "this agent address has too many pending authorization requests for the namespace and service")},
	{errSessionInvalid, errUnauthenticated},
	{ErrUnavailable, apierror.New(http.StatusServiceUnavailable, "DATABASE_UNAVAILABLE", "database unavailable")},
}

// Errors raised by the HTTP layer itself.
var (
	errUnauthenticated   = apierror.New(http.StatusUnauthorized, "UNAUTHENTICATED", "a valid idn_session is required")
	errSignatureInvalid  = apierror.New(http.StatusUnauthorized, "SIGNATURE_INVALID", "missing or invalid signed headers")
	errNonceReplay       = apierror.New(http.StatusConflict, "NONCE_REPLAY", "nonce already used")
	errAPIKeyInvalid     = apierror.New(http.StatusUnauthorized, "API_KEY_INVALID", "missing or invalid service api key")
	errServiceMismatch   = apierror.New(http.StatusForbidden, "SERVICE_MISMATCH", "service differs from the api key's service")
	errNamespaceForbid   = apierror.New(http.StatusForbidden, "NAMESPACE_FORBIDDEN", "not authorized for this namespace")
	errOriginForbidden   = apierror.New(http.StatusForbidden, "ORIGIN_FORBIDDEN", "request origin is not allowed")
	errInvalidNamespace  = apierror.New(http.StatusBadRequest, "INVALID_NAMESPACE", "invalid namespace format")
	errInvalidDID        = apierror.New(http.StatusBadRequest, "INVALID_DID", "malformed DID")
	errMetricsForbidden  = apierror.New(http.StatusForbidden, "METRICS_FORBIDDEN", "metrics are served to loopback clients and to bearers of the metrics token")
	errDIDNotFound       = apierror.New(http.StatusNotFound, "DID_NOT_FOUND", "DID not found")
	errNotFound          = apierror.New(http.StatusNotFound, "NOT_FOUND", "no such route")
	errNotAcceptable     = apierror.New(http.StatusNotAcceptable, "NOT_ACCEPTABLE", "supported types: application/did+json, application/did+ld+json, application/json")
	errInternal          = apierror.New(http.StatusInternalServerError, "INTERNAL_ERROR", "internal error")
	errBodyTooLarge      = apierror.New(http.StatusRequestEntityTooLarge, "REQUEST_BODY_TOO_LARGE", "request body too large")
	errUnsupportedMedia  = apierror.New(http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", "Content-Type must be application/json")
	errClaimStateInvalid = apierror.New(http.StatusConflict, "CLAIM_STATE_CONFLICT", "transition not allowed")
)

func validationError(format string, args ...any) *apierror.Error {
	return apierror.New(http.StatusBadRequest, "VALIDATION_ERROR", fmt.Sprintf(format, args...))
}

// writeErr answers err: a *apierror.Error as is, a known sentinel through
// errorTable, anything else as 500 (logged, never echoed).
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apierror.Error
	var te *transitionError
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &te):
		ae = errClaimStateInvalid.With("details", map[string]string{"action": te.Action, "status": te.From})
		ae.Message = te.Error()[len("controlplane: "):]
	case errors.Is(err, context.Canceled):
		return
	default:
		for _, row := range errorTable {
			if errors.Is(err, row.err) {
				ae = row.resp
				break
			}
		}
		if ae == nil {
			ae = errInternal
		}
		if ae.Status >= 500 {
			s.log.ErrorContext(r.Context(), "request failed", "path", r.URL.Path, "request_id", apierror.RequestIDFrom(r.Context()), "err", err)
		}
	}
	apierror.Write(w, r, ae)
}

// isUniqueViolation reports a UNIQUE constraint failure on either engine.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23505"
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		return coded.Code() == 2067 || coded.Code() == 1555 // SQLITE_CONSTRAINT_UNIQUE, _PRIMARYKEY
	}
	return false
}

// Errors of passkey accounts and sessions (auth_*.go). They are API errors
// themselves, so the store can return them and writeErr passes them on.
var (
	errNamespaceTaken   = apierror.New(http.StatusConflict, "NAMESPACE_TAKEN", "namespace is not available")
	errCredentialBad    = apierror.New(http.StatusBadRequest, "CREDENTIAL_INVALID", "credential is not a valid PublicKeyCredential JSON")
	errChallengeInvalid = apierror.New(http.StatusUnauthorized, "CHALLENGE_INVALID", "unknown or already used challenge for this ceremony")
	errChallengeExpired = apierror.New(http.StatusUnauthorized, "CHALLENGE_EXPIRED", "challenge expired: request new options")
	errWebAuthnFailed   = apierror.New(http.StatusUnauthorized, "WEBAUTHN_FAILED", "passkey verification failed")
	errPasskeyCloned    = apierror.New(http.StatusUnauthorized, "PASSKEY_COUNTER_REGRESSION", "signature counter did not increase: the authenticator may be cloned")
	errPasskeyExists    = apierror.New(http.StatusConflict, "PASSKEY_EXISTS", "this passkey is already registered")
	errPasskeyNotFound  = apierror.New(http.StatusNotFound, "PASSKEY_NOT_FOUND", "passkey not found")
	errLastPasskey      = apierror.New(http.StatusConflict, "LAST_PASSKEY", "the last passkey of an account cannot be deleted")
	errNoPasskeys       = apierror.New(http.StatusConflict, "NO_PASSKEYS", "the namespace has no passkey to sign in with")
	errRateLimited      = apierror.New(http.StatusTooManyRequests, "RATE_LIMITED", "too many attempts; retry later")
	errReauthRequired   = apierror.New(http.StatusForbidden, "REAUTH_REQUIRED", "verify with an established passkey again (GET /v1/auth/verify/options, POST /v1/auth/verify) within 5 minutes before this action")
	errSessionNotFound  = apierror.New(http.StatusNotFound, "SESSION_NOT_FOUND", "session not found")
)
