package controlplane

import (
	"context"
	"time"

	"github.com/idnhq/idn/controlplane/internal/ownerauth"
)

// SessionCookie is the name of the owner session cookie.
const SessionCookie = ownerauth.SessionCookie

// AuthConfig configures passkey accounts (WebAuthn); see ownerauth.Config.
type AuthConfig = ownerauth.Config

// IssueSession starts a session for the owner of namespace ns and returns
// the token that is the value of the idn_session cookie, and its expiry.
// The session is recorded in the database, so ending it there (logout,
// account deletion) refuses the token at once on every instance. An unknown
// or deactivated namespace gets no session, nor does one that has
// Config.MaxSessions live sessions.
func (s *Server) IssueSession(ctx context.Context, ns string) (token string, expires time.Time, err error) {
	return s.sessions.Issue(ctx, ns)
}
