package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/internal/apierror"
	"github.com/jackc/pgx/v5/pgconn"
)

// Domain errors returned by the store and the claim lifecycle. They know
// nothing of HTTP: errorTable alone maps them to codes.
var (
	errNamespaceNotFound    = errors.New("controlplane: namespace not found")
	errNamespaceDeactivated = errors.New("controlplane: namespace deactivated")
	errNamespaceTaken       = errors.New("controlplane: namespace taken")
	errServiceNotFound      = errors.New("controlplane: service not found")
	errSlugTaken            = errors.New("controlplane: service slug already taken")
	errKeyNotFound          = errors.New("controlplane: api key not found")
	errKeyLimit             = errors.New("controlplane: api key limit reached")
	errClaimNotFound        = errors.New("controlplane: claim not found")
	errPendingLimit         = errors.New("controlplane: pending claim limit reached")
	errAgentPendingLimit    = errors.New("controlplane: pending claim limit of the agent address reached")
	errSessionInvalid       = errors.New("controlplane: session invalid")
	errChallengeInvalid     = errors.New("controlplane: unknown or used challenge")
	errChallengeExpired     = errors.New("controlplane: challenge expired")
	errPasskeyCloned        = errors.New("controlplane: passkey signature counter regression")
	errPasskeyExists        = errors.New("controlplane: passkey already registered")
	errPasskeyNotFound      = errors.New("controlplane: passkey not found")
	errLastPasskey          = errors.New("controlplane: last passkey of the account")
	errWebhookNotFound      = errors.New("controlplane: webhook not found")
	errWebhookLimit         = errors.New("controlplane: webhook limit reached")
	errSigninLinkInvalid    = errors.New("controlplane: sign-in link unknown, used or expired")
)

// transitionError is a claim state move that the state machine forbids.
type transitionError struct {
	Action string // approve, reject, revoke
	From   string // the claim's current status
}

func (e *transitionError) Error() string {
	return fmt.Sprintf("controlplane: cannot %s a claim that is %s", e.Action, e.From)
}

// reauthError refuses a credential change: the session's passkey
// verification is missing, too old or no longer counts.
type reauthError struct {
	Reason      string    // not_verified, verification_expired, ...
	TrustedFrom time.Time // for passkey_too_new: when the verifying passkey becomes established
}

func (e *reauthError) Error() string { return "controlplane: step-up required: " + e.Reason }

// namespaceError says why a name cannot be a new namespace.
type namespaceError struct {
	Namespace string
	Reserved  bool // a word of the API's paths; else the identity rule fails
}

func (e *namespaceError) Error() string {
	if e.Reserved {
		return fmt.Sprintf("controlplane: namespace %q is reserved", e.Namespace)
	}
	return fmt.Sprintf("controlplane: invalid namespace %q", e.Namespace)
}

// registryWriteError is a failed registry write; the claim is unchanged.
type registryWriteError struct{ Err error }

func (e *registryWriteError) Error() string {
	return "controlplane: registry write failed: " + e.Err.Error()
}
func (e *registryWriteError) Unwrap() error { return e.Err }

// errorRule answers the errors that match with build's envelope.
type errorRule struct {
	match func(error) bool
	build func(error) *apierror.Error
}

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

func isType[T error](err error) bool { _, ok := errors.AsType[T](err); return ok }

// answer builds the envelope of code with its default message.
func answer(code errcode.Code) func(error) *apierror.Error {
	return func(error) *apierror.Error { return apierror.Coded(code, "") }
}

// answerWait is answer with the Retry-After of a *retryLater in err.
func answerWait(code errcode.Code) func(error) *apierror.Error {
	return func(err error) *apierror.Error {
		e := apierror.Coded(code, "")
		if rl, ok := errors.AsType[*retryLater](err); ok {
			e = e.WithRetryAfter(rl.Wait)
		}
		return e
	}
}

// errorTable is the one place where the errors of the store, the claim
// lifecycle and the HTTP layer become answers; the first matching row wins.
var errorTable = []errorRule{
	{isType[*apierror.Error], func(err error) *apierror.Error { e, _ := errors.AsType[*apierror.Error](err); return e }},
	{is(errNamespaceNotFound), answer(errcode.NamespaceNotFound)},
	{is(errFeedCursorExpired), answer(errcode.FeedCursorExpired)},
	{is(errNamespaceDeactivated), answer(errcode.NamespaceDeactivated)},
	{is(errNamespaceTaken), answer(errcode.NamespaceTaken)},
	{is(errServiceNotFound), answer(errcode.ServiceNotFound)},
	{is(errSlugTaken), answer(errcode.SlugTaken)},
	{is(errKeyNotFound), answer(errcode.APIKeyNotFound)},
	{is(errKeyLimit), answer(errcode.APIKeyLimitReached)},
	{is(errServiceLimit), answer(errcode.ServiceLimitReached)},
	{is(errGatewayLimit), answer(errcode.GatewayLimitReached)},
	{is(errPairingLimit), answerWait(errcode.PairingLimitReached)},
	{is(errSessionLimit), answerWait(errcode.SessionLimitReached)},
	{is(errClaimNotFound), answer(errcode.ClaimNotFound)},
	{is(errPendingLimit), answer(errcode.PendingLimitReached)},
	{is(errAgentPendingLimit), answer(errcode.AgentPendingLimitReached)},
	{is(errSessionInvalid), func(error) *apierror.Error { return errUnauthenticated }},
	{is(errChallengeInvalid), answer(errcode.ChallengeInvalid)},
	{is(errChallengeExpired), answer(errcode.ChallengeExpired)},
	{is(errPasskeyCloned), answer(errcode.PasskeyCounterRegression)},
	{is(errPasskeyExists), answer(errcode.PasskeyExists)},
	{is(errPasskeyNotFound), answer(errcode.PasskeyNotFound)},
	{is(errLastPasskey), answer(errcode.LastPasskey)},
	{is(errWebhookNotFound), answer(errcode.WebhookNotFound)},
	{is(errWebhookLimit), answer(errcode.WebhookLimitReached)},
	{is(errSigninLinkInvalid), answer(errcode.SigninLinkInvalid)},
	{isType[*transitionError], func(err error) *apierror.Error {
		te, _ := errors.AsType[*transitionError](err)
		return apierror.Coded(errcode.ClaimStateConflict, strings.TrimPrefix(te.Error(), "controlplane: ")).
			With("details", map[string]string{"action": te.Action, "status": te.From})
	}},
	{isType[*reauthError], func(err error) *apierror.Error {
		re, _ := errors.AsType[*reauthError](err)
		details := map[string]string{"reason": re.Reason}
		if !re.TrustedFrom.IsZero() {
			details["passkey_trusted_from"] = timestamp(re.TrustedFrom)
		}
		return apierror.Coded(errcode.ReauthRequired, "").With("details", details)
	}},
	{isType[*namespaceError], func(err error) *apierror.Error {
		ne, _ := errors.AsType[*namespaceError](err)
		if ne.Reserved {
			return validationError("namespace %q is reserved: it is a word of the API's paths", ne.Namespace).
				With("details", map[string]string{"namespace": ne.Namespace, "reason": "reserved"})
		}
		return errInvalidNamespace.With("details", map[string]string{"namespace": ne.Namespace})
	}},
	{isType[*registryWriteError], func(err error) *apierror.Error {
		re, _ := errors.AsType[*registryWriteError](err)
		return apierror.Coded(errcode.RegistryWriteFailed, "").With("details", map[string]string{"reason": re.Err.Error()})
	}},
	{is(errGatewayNotFound), answer(errcode.GatewayNotFound)},
	{is(errGatewayNotPaired), answer(errcode.GatewayNotPaired)},
	{is(errGatewayOffline), answer(errcode.GatewayOffline)},
	{is(errGatewayTimeout), answer(errcode.GatewayTimeout)},
	{is(errGatewayRPCLimit), func(error) *apierror.Error {
		return apierror.Coded(errcode.GatewayRPCLimitReached, "").WithRetryAfter(time.Second)
	}},
	{is(errPairingExpired), answer(errcode.PairingExpired)},
	{is(errPairingEnded), answer(errcode.PairingEnded)},
	{isType[*pairingCodeError], func(err error) *apierror.Error {
		pe, _ := errors.AsType[*pairingCodeError](err)
		e := apierror.Coded(errcode.PairingCodeInvalid, "")
		if pe.AttemptsLeft >= 0 {
			e = e.With("details", map[string]int{"attempts_left": pe.AttemptsLeft})
		}
		return e
	}},
	{is(ErrBusy), func(error) *apierror.Error {
		return apierror.Coded(errcode.DatabaseBusy, "").WithRetryAfter(time.Second)
	}},
	{is(ErrUnavailable), answer(errcode.DatabaseUnavailable)},
}

// toAPIError is err's answer through errorTable; an error no row matches
// is 500 INTERNAL_ERROR.
func toAPIError(err error) *apierror.Error {
	for _, row := range errorTable {
		if row.match(err) {
			return row.build(err)
		}
	}
	return errInternal
}

// Errors raised by the HTTP layer itself.
var (
	errUnauthenticated  = apierror.Coded(errcode.AdminUnauthorized, "a valid idn_session is required")
	errNonceStoreFull   = apierror.Coded(errcode.NonceStoreFull, "")
	errAPIKeyInvalid    = apierror.Coded(errcode.APIKeyInvalid, "")
	errServiceMismatch  = apierror.Coded(errcode.ServiceMismatch, "")
	errNamespaceForbid  = apierror.Coded(errcode.NamespaceForbidden, "")
	errOriginForbidden  = apierror.Coded(errcode.OriginForbidden, "")
	errMetricsForbidden = apierror.Coded(errcode.AdminForbidden, "metrics are served to loopback clients and to bearers of the metrics token")
	errInvalidNamespace = apierror.Coded(errcode.NamespaceInvalid, "")
	errInvalidDID       = apierror.Coded(errcode.InvalidDID, "")
	errDIDNotFound      = apierror.Coded(errcode.DIDNotFound, "")
	errNotFound         = apierror.Coded(errcode.NotFound, "no such route")
	errNotAcceptable    = apierror.Coded(errcode.NotAcceptable, "supported types: application/did+json, application/did+ld+json, application/json")
	errInternal         = apierror.Coded(errcode.InternalError, "")
	errBodyTooLarge     = apierror.Coded(errcode.RequestBodyTooLarge, "")
	errUnsupportedMedia = apierror.Coded(errcode.UnsupportedMediaType, "")
	errCredentialBad    = apierror.Coded(errcode.CredentialInvalid, "")
	errWebAuthnFailed   = apierror.Coded(errcode.WebAuthnFailed, "")
	errNoPasskeys       = apierror.Coded(errcode.NoPasskeys, "")
	errRateLimited      = apierror.Coded(errcode.RateLimited, "")
	errSessionNotFound  = apierror.Coded(errcode.SessionNotFound, "")
	errWebhooksDisabled = apierror.Coded(errcode.WebhooksDisabled, "")
	errWebhookURL       = apierror.Coded(errcode.WebhookURLForbidden, "")
)

func validationError(format string, args ...any) *apierror.Error {
	return apierror.Coded(errcode.ValidationError, fmt.Sprintf(format, args...))
}

// writeErr answers err through errorTable; anything else is a 500 whose
// detail is logged, never echoed. A cancelled request gets no answer.
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	ae := toAPIError(err)
	if ae.Code().Status() >= 500 && !isType[*apierror.Error](err) {
		s.log.ErrorContext(r.Context(), "request failed", "path", r.URL.Path, "request_id", apierror.RequestIDFrom(r.Context()), "err", err)
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
