package controlplane

import (
	"net/http"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/claims"
	"github.com/idnhq/idn/controlplane/internal/ownerauth"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/errcode"
)

// Errors of the composition's own routes (metrics).
var (
	errMetricsForbidden = apierror.Coded(errcode.AdminForbidden, "metrics are served to loopback clients and to bearers of the metrics token")
)

// errorRules maps the errors the composition's routes meet: its own, and
// those of the parts it calls (sessions, the claims provisioning).
var errorRules = append(web.Rules{
	web.When(web.Is(ownerauth.ErrSessionLimit), web.CodeWait(errcode.SessionLimitReached)),
}, claims.ErrorRules...)

// writeErr answers err through errorRules and the kit.
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	s.kit.Error(w, r, errorRules.Answer(err))
}
