package controlplane

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// SessionCookie is the name of the owner session cookie.
const SessionCookie = "idn_session"

// sessionClaims is the JWT body of a session: namespace, iat, exp, sid.
type sessionClaims struct {
	Namespace string `json:"namespace"`
	SessionID string `json:"sid"`
	jwt.RegisteredClaims
}

// IssueSession starts a session for the owner of namespace ns and returns
// the token that is the value of the idn_session cookie, and its expiry.
// The session is recorded in the database, so ending it there (logout,
// account deletion) refuses the token at once on every instance. An unknown
// or deactivated namespace gets no session, nor does one that has
// Config.MaxSessions live sessions.
func (s *Server) IssueSession(ctx context.Context, ns string) (token string, expires time.Time, err error) {
	return s.issueSession(ctx, ns, sessionStart{})
}

// issueSession starts a session of ns described by start; a session started
// by a passkey counts as verified by it (recent verification).
func (s *Server) issueSession(ctx context.Context, ns string, start sessionStart) (token string, expires time.Time, err error) {
	rec, err := s.store.namespace(ctx, ns)
	if err != nil {
		return "", time.Time{}, err
	}
	if !rec.Deactivated.IsZero() {
		return "", time.Time{}, errNamespaceDeactivated
	}
	// The row keeps the exact start, which orders an owner's session list;
	// the token carries whole seconds.
	now := s.now()
	issued := now.Truncate(time.Second)
	expires = issued.Add(s.cfg.SessionTTL)
	sid, err := s.store.createSession(ctx, ns, s.cfg.MaxSessions, now, expires)
	if err != nil {
		return "", time.Time{}, err
	}
	if err := s.store.describeSession(ctx, sid, start, now); err != nil {
		return "", time.Time{}, err
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, sessionClaims{
		Namespace: ns,
		SessionID: sid,
		RegisteredClaims: jwt.RegisteredClaims{
			IssuedAt:  jwt.NewNumericDate(issued),
			ExpiresAt: jwt.NewNumericDate(expires),
		},
	})
	token, err = tok.SignedString(s.cfg.JWTSecret)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("controlplane: sign session: %w", err)
	}
	return token, expires, nil
}

// session authenticates a session token: HS256 only, exp required, and the
// sid must still be live in the database for the same namespace.
func (s *Server) session(ctx context.Context, token string) (namespace string, err error) {
	c, err := s.parseSession(token)
	if err != nil {
		return "", err
	}
	if err := s.store.checkSession(ctx, c.SessionID, c.Namespace, s.now()); err != nil {
		return "", err
	}
	return c.Namespace, nil
}

// parseSession checks a token's signature and expiry, not the database.
func (s *Server) parseSession(token string) (sessionClaims, error) {
	var c sessionClaims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return s.cfg.JWTSecret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(s.now))
	if err != nil || c.Namespace == "" || c.SessionID == "" {
		return sessionClaims{}, errSessionInvalid
	}
	return c, nil
}

// sessionCookie builds the idn_session cookie: HttpOnly, SameSite=Lax,
// Path=/, Secure unless Config.InsecureLocalhostCookie is set and the
// request addressed http://localhost.
func (s *Server) sessionCookie(r *http.Request, token string, expires time.Time) *http.Cookie {
	c := &http.Cookie{
		Name:     SessionCookie,
		Value:    token,
		Path:     "/",
		Expires:  expires,
		MaxAge:   int(expires.Sub(s.now()).Seconds()),
		HttpOnly: true,
		Secure:   true,
		SameSite: http.SameSiteLaxMode,
	}
	if s.cfg.InsecureLocalhostCookie && s.proxy.Scheme(r) == "http" {
		host := s.proxy.Host(r)
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if host == "localhost" {
			c.Secure = false
		}
	}
	return c
}

// clearedSessionCookie expires the idn_session cookie in the browser.
func (s *Server) clearedSessionCookie(r *http.Request) *http.Cookie {
	c := s.sessionCookie(r, "", s.now())
	c.Expires, c.MaxAge = time.Unix(0, 0), -1
	return c
}
