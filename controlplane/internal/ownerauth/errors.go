package ownerauth

import (
	"errors"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/errcode"
)

// Errors of accounts and sessions; errorRules maps them to codes.
var (
	errNamespaceNotFound    = sqldb.ErrNamespaceNotFound
	errNamespaceDeactivated = sqldb.ErrNamespaceDeactivated
	errNamespaceTaken       = errors.New("controlplane: namespace taken")
	errSessionInvalid       = errors.New("controlplane: session invalid")
	errChallengeInvalid     = errors.New("controlplane: unknown or used challenge")
	errChallengeExpired     = errors.New("controlplane: challenge expired")
	errPasskeyCloned        = errors.New("controlplane: passkey signature counter regression")
	errPasskeyExists        = errors.New("controlplane: passkey already registered")
	errPasskeyNotFound      = errors.New("controlplane: passkey not found")
	errLastPasskey          = errors.New("controlplane: last passkey of the account")
)

// ErrSessionLimit refuses a session to a namespace that has
// SessionConfig.MaxSessions live ones; it comes wrapped in a
// *web.RetryLater saying when the oldest expires.
var ErrSessionLimit = errors.New("controlplane: session limit of the namespace reached")

// Answers raised by the handlers themselves.
var (
	errCredentialBad   = apierror.Coded(errcode.CredentialInvalid, "")
	errWebAuthnFailed  = apierror.Coded(errcode.WebAuthnFailed, "")
	errNoPasskeys      = apierror.Coded(errcode.NoPasskeys, "")
	errSessionNotFound = apierror.Coded(errcode.SessionNotFound, "")
)

// reauthError is a credential change refused for lack of a recent
// step-up; Reason says why, TrustedFrom when a too-new passkey may
// confirm.
type reauthError struct {
	Reason      string
	TrustedFrom time.Time
}

func (e *reauthError) Error() string { return "controlplane: step-up required: " + e.Reason }

// errorRules maps this package's errors to answers.
var errorRules = web.Rules{
	web.When(web.Is(errNamespaceNotFound), web.Code(errcode.NamespaceNotFound)),
	web.When(web.Is(errNamespaceDeactivated), web.Code(errcode.NamespaceDeactivated)),
	web.When(web.Is(errNamespaceTaken), web.Code(errcode.NamespaceTaken)),
	web.When(web.Is(errSessionInvalid), func(error) *apierror.Error { return web.ErrUnauthenticated }),
	web.When(web.Is(ErrSessionLimit), web.CodeWait(errcode.SessionLimitReached)),
	web.When(web.Is(errChallengeInvalid), web.Code(errcode.ChallengeInvalid)),
	web.When(web.Is(errChallengeExpired), web.Code(errcode.ChallengeExpired)),
	web.When(web.Is(errPasskeyCloned), web.Code(errcode.PasskeyCounterRegression)),
	web.When(web.Is(errPasskeyExists), web.Code(errcode.PasskeyExists)),
	web.When(web.Is(errPasskeyNotFound), web.Code(errcode.PasskeyNotFound)),
	web.When(web.Is(errLastPasskey), web.Code(errcode.LastPasskey)),
	web.When(web.IsType[*reauthError], func(err error) *apierror.Error {
		re, _ := errors.AsType[*reauthError](err)
		details := map[string]string{"reason": re.Reason}
		if !re.TrustedFrom.IsZero() {
			details["passkey_trusted_from"] = web.Timestamp(re.TrustedFrom)
		}
		return apierror.Coded(errcode.ReauthRequired, "").With("details", details)
	}),
}

// answer is err's answer by errorRules, or err for the kit to answer.
func answer(err error) error { return errorRules.Answer(err) }
