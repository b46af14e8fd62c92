package controlplane

import (
	"errors"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/controlplane/ownerauth"
	"net/http"
	"strings"

	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/internal/apierror"
)

// Domain errors returned by the store and the claim lifecycle. They know
// nothing of HTTP: errorTable alone maps them to codes.
var (
	errNamespaceNotFound    = sqldb.ErrNamespaceNotFound
	errNamespaceDeactivated = sqldb.ErrNamespaceDeactivated
	errServiceNotFound      = errors.New("controlplane: service not found")
	errSlugTaken            = errors.New("controlplane: service slug already taken")
	errKeyNotFound          = errors.New("controlplane: api key not found")
	errKeyLimit             = errors.New("controlplane: api key limit reached")
	errClaimNotFound        = errors.New("controlplane: claim not found")
	errPendingLimit         = errors.New("controlplane: pending claim limit reached")
	errAgentPendingLimit    = errors.New("controlplane: pending claim limit of the agent address reached")
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
	web.When(web.Is(errServiceNotFound), web.Code(errcode.ServiceNotFound)),
	web.When(web.Is(errSlugTaken), web.Code(errcode.SlugTaken)),
	web.When(web.Is(errKeyNotFound), web.Code(errcode.APIKeyNotFound)),
	web.When(web.Is(errKeyLimit), web.Code(errcode.APIKeyLimitReached)),
	web.When(web.Is(errServiceLimit), web.Code(errcode.ServiceLimitReached)),
	web.When(web.Is(ownerauth.ErrSessionLimit), web.CodeWait(errcode.SessionLimitReached)),
	web.When(web.Is(errClaimNotFound), web.Code(errcode.ClaimNotFound)),
	web.When(web.Is(errPendingLimit), web.Code(errcode.PendingLimitReached)),
	web.When(web.Is(errAgentPendingLimit), web.Code(errcode.AgentPendingLimitReached)),
	web.When(web.Is(errSigninLinkInvalid), web.Code(errcode.SigninLinkInvalid)),
	web.When(web.IsType[*transitionError], func(err error) *apierror.Error {
		te, _ := errors.AsType[*transitionError](err)
		return apierror.Coded(errcode.ClaimStateConflict, strings.TrimPrefix(te.Error(), "controlplane: ")).
			With("details", map[string]string{"action": te.Action, "status": te.From})
	}),
	web.When(web.IsType[*registryWriteError], func(err error) *apierror.Error {
		re, _ := errors.AsType[*registryWriteError](err)
		return apierror.Coded(errcode.RegistryWriteFailed, "").With("details", map[string]string{"reason": re.Err.Error()})
	}),
}

// Errors raised by the HTTP layer itself.
var (
	errAPIKeyInvalid    = apierror.Coded(errcode.APIKeyInvalid, "")
	errServiceMismatch  = apierror.Coded(errcode.ServiceMismatch, "")
	errMetricsForbidden = apierror.Coded(errcode.AdminForbidden, "metrics are served to loopback clients and to bearers of the metrics token")
	errInvalidDID       = apierror.Coded(errcode.InvalidDID, "")
	errDIDNotFound      = apierror.Coded(errcode.DIDNotFound, "")
	errNotAcceptable    = apierror.Coded(errcode.NotAcceptable, "supported types: application/did+json, application/did+ld+json, application/json")
)

// toAPIError is err's answer through errorRules and the kit.
func toAPIError(err error) *apierror.Error { return web.Answer(errorRules.Answer(err)) }

// writeErr answers err through errorRules and the kit.
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	s.kit.Error(w, r, errorRules.Answer(err))
}
