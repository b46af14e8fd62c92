package dashboard

import (
	"errors"

	"github.com/idnhq/idn/controlplane/internal/claims"
	"github.com/idnhq/idn/controlplane/internal/ownerauth"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/errcode"
)

// errSigninLinkInvalid refuses a sign-in link that is unknown, used or
// expired.
var errSigninLinkInvalid = errors.New("controlplane: sign-in link unknown, used or expired")

// errorRules maps the errors the dashboard's routes meet: its own, a
// session refused for the limit, and the claims' (an inactive namespace).
var errorRules = append(web.Rules{
	web.When(web.Is(ownerauth.ErrSessionLimit), web.CodeWait(errcode.SessionLimitReached)),
	web.When(web.Is(errSigninLinkInvalid), web.Code(errcode.SigninLinkInvalid)),
}, claims.ErrorRules...)
