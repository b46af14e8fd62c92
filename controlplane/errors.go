package controlplane

import (
	"errors"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/http"
	"strings"
	"time"

	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/internal/apierror"
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

// errorTable is the one place where the errors of the store, the claim
// lifecycle and the HTTP layer become answers; the first matching row wins.
var errorRules = web.Rules{
	web.When(web.Is(errNamespaceNotFound), web.Code(errcode.NamespaceNotFound)),
	web.When(web.Is(errFeedCursorExpired), web.Code(errcode.FeedCursorExpired)),
	web.When(web.Is(errNamespaceDeactivated), web.Code(errcode.NamespaceDeactivated)),
	web.When(web.Is(errNamespaceTaken), web.Code(errcode.NamespaceTaken)),
	web.When(web.Is(errServiceNotFound), web.Code(errcode.ServiceNotFound)),
	web.When(web.Is(errSlugTaken), web.Code(errcode.SlugTaken)),
	web.When(web.Is(errKeyNotFound), web.Code(errcode.APIKeyNotFound)),
	web.When(web.Is(errKeyLimit), web.Code(errcode.APIKeyLimitReached)),
	web.When(web.Is(errServiceLimit), web.Code(errcode.ServiceLimitReached)),
	web.When(web.Is(errSessionLimit), web.CodeWait(errcode.SessionLimitReached)),
	web.When(web.Is(errClaimNotFound), web.Code(errcode.ClaimNotFound)),
	web.When(web.Is(errPendingLimit), web.Code(errcode.PendingLimitReached)),
	web.When(web.Is(errAgentPendingLimit), web.Code(errcode.AgentPendingLimitReached)),
	web.When(web.Is(errSessionInvalid), web.Code(errcode.Unauthenticated)),
	web.When(web.Is(errChallengeInvalid), web.Code(errcode.ChallengeInvalid)),
	web.When(web.Is(errChallengeExpired), web.Code(errcode.ChallengeExpired)),
	web.When(web.Is(errPasskeyCloned), web.Code(errcode.PasskeyCounterRegression)),
	web.When(web.Is(errPasskeyExists), web.Code(errcode.PasskeyExists)),
	web.When(web.Is(errPasskeyNotFound), web.Code(errcode.PasskeyNotFound)),
	web.When(web.Is(errLastPasskey), web.Code(errcode.LastPasskey)),
	web.When(web.Is(errWebhookNotFound), web.Code(errcode.WebhookNotFound)),
	web.When(web.Is(errWebhookLimit), web.Code(errcode.WebhookLimitReached)),
	web.When(web.Is(errSigninLinkInvalid), web.Code(errcode.SigninLinkInvalid)),
	web.When(web.IsType[*transitionError], func(err error) *apierror.Error {
		te, _ := errors.AsType[*transitionError](err)
		return apierror.Coded(errcode.ClaimStateConflict, strings.TrimPrefix(te.Error(), "controlplane: ")).
			With("details", map[string]string{"action": te.Action, "status": te.From})
	}),
	web.When(web.IsType[*reauthError], func(err error) *apierror.Error {
		re, _ := errors.AsType[*reauthError](err)
		details := map[string]string{"reason": re.Reason}
		if !re.TrustedFrom.IsZero() {
			details["passkey_trusted_from"] = web.Timestamp(re.TrustedFrom)
		}
		return apierror.Coded(errcode.ReauthRequired, "").With("details", details)
	}),
	web.When(web.IsType[*namespaceError], func(err error) *apierror.Error {
		ne, _ := errors.AsType[*namespaceError](err)
		if ne.Reserved {
			return web.Validation("namespace %q is reserved: it is a word of the API's paths", ne.Namespace).
				With("details", map[string]string{"namespace": ne.Namespace, "reason": "reserved"})
		}
		return web.ErrInvalidNamespace.With("details", map[string]string{"namespace": ne.Namespace})
	}),
	web.When(web.IsType[*registryWriteError], func(err error) *apierror.Error {
		re, _ := errors.AsType[*registryWriteError](err)
		return apierror.Coded(errcode.RegistryWriteFailed, "").With("details", map[string]string{"reason": re.Err.Error()})
	}),
}

// Errors raised by the HTTP layer itself.
var (
	errSignatureInvalid = apierror.Coded(errcode.SignatureInvalid, "")
	errNonceReplay      = apierror.Coded(errcode.NonceReplay, "")
	errNonceStoreFull   = apierror.Coded(errcode.NonceStoreFull, "")
	errAPIKeyInvalid    = apierror.Coded(errcode.APIKeyInvalid, "")
	errServiceMismatch  = apierror.Coded(errcode.ServiceMismatch, "")
	errMetricsForbidden = apierror.Coded(errcode.MetricsForbidden, "")
	errInvalidDID       = apierror.Coded(errcode.InvalidDID, "")
	errDIDNotFound      = apierror.Coded(errcode.DIDNotFound, "")
	errNotAcceptable    = apierror.Coded(errcode.NotAcceptable, "supported types: application/did+json, application/did+ld+json, application/json")
	errCredentialBad    = apierror.Coded(errcode.CredentialInvalid, "")
	errWebAuthnFailed   = apierror.Coded(errcode.WebAuthnFailed, "")
	errNoPasskeys       = apierror.Coded(errcode.NoPasskeys, "")
	errSessionNotFound  = apierror.Coded(errcode.SessionNotFound, "")
	errWebhooksDisabled = apierror.Coded(errcode.WebhooksDisabled, "")
	errWebhookURL       = apierror.Coded(errcode.WebhookURLForbidden, "")
)

// toAPIError is err's answer through errorRules and the kit.
func toAPIError(err error) *apierror.Error { return web.Answer(errorRules.Answer(err)) }

// writeErr answers err through errorRules and the kit.
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	s.kit.Error(w, r, errorRules.Answer(err))
}
