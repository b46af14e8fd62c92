package claims

import (
	"errors"
	"fmt"
	"strings"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/errcode"
)

// Errors of the store and the claim lifecycle. They know nothing of HTTP:
// errorRules alone maps them to codes.
var (
	errNamespaceNotFound    = sqldb.ErrNamespaceNotFound
	errNamespaceDeactivated = sqldb.ErrNamespaceDeactivated
	ErrServiceNotFound      = errors.New("controlplane: service not found")
	errSlugTaken            = errors.New("controlplane: service slug already taken")
	errKeyNotFound          = errors.New("controlplane: api key not found")
	errKeyLimit             = errors.New("controlplane: api key limit reached")
	errServiceLimit         = errors.New("controlplane: service limit of the namespace reached")
	ErrClaimNotFound        = errors.New("controlplane: claim not found")
	errPendingLimit         = errors.New("controlplane: pending claim limit reached")
	errAgentPendingLimit    = errors.New("controlplane: pending claim limit of the agent address reached")
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

// ErrorRules maps this package's errors to answers; the composition
// answers with them the claims errors of the calls it makes (Retire,
// Provision).
var ErrorRules = web.Rules{
	web.When(web.Is(errNamespaceNotFound), web.Code(errcode.NamespaceNotFound)),
	web.When(web.Is(errFeedCursorExpired), web.Code(errcode.FeedCursorExpired)),
	web.When(web.Is(errNamespaceDeactivated), web.Code(errcode.NamespaceDeactivated)),
	web.When(web.Is(ErrServiceNotFound), web.Code(errcode.ServiceNotFound)),
	web.When(web.Is(errSlugTaken), web.Code(errcode.SlugTaken)),
	web.When(web.Is(errKeyNotFound), web.Code(errcode.APIKeyNotFound)),
	web.When(web.Is(errKeyLimit), web.Code(errcode.APIKeyLimitReached)),
	web.When(web.Is(errServiceLimit), web.Code(errcode.ServiceLimitReached)),
	web.When(web.Is(ErrClaimNotFound), web.Code(errcode.ClaimNotFound)),
	web.When(web.Is(errPendingLimit), web.Code(errcode.PendingLimitReached)),
	web.When(web.Is(errAgentPendingLimit), web.Code(errcode.AgentPendingLimitReached)),
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

// Errors raised by the handlers themselves.
var (
	errAPIKeyInvalid   = apierror.Coded(errcode.APIKeyInvalid, "")
	errServiceMismatch = apierror.Coded(errcode.ServiceMismatch, "")
	errInvalidDID      = apierror.Coded(errcode.InvalidDID, "")
	errDIDNotFound     = apierror.Coded(errcode.DIDNotFound, "")
	errNotAcceptable   = apierror.Coded(errcode.NotAcceptable, "supported types: application/did+json, application/did+ld+json, application/json")
)
