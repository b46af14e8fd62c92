package ownerauth

import (
	"context"
	"errors"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// SessionCookie is the name of the owner session cookie unless
// SessionConfig.CookieName gives another.
const SessionCookie = "idn_session"

// SessionConfig configures owner sessions.
type SessionConfig struct {
	// Secret is the HS256 key of session tokens (JWT_SECRET), at least 32
	// bytes. Required.
	Secret []byte
	// TTL is the session lifetime; zero means 7 days.
	TTL time.Duration
	// MaxSessions is the live sessions one namespace may have
	// (MAX_SESSIONS_PER_NAMESPACE); past it a new session is refused with
	// 429 SESSION_LIMIT_REACHED and Retry-After. Zero means 100.
	MaxSessions int
	// InsecureLocalhostCookie drops the Secure attribute of the session
	// cookie for requests that addressed http://localhost. False always
	// sets Secure.
	InsecureLocalhostCookie bool
	// CookieName names the session cookie; empty means SessionCookie
	// (idn_session). Browsers send a host's cookies to all its ports, so
	// two control planes on one host name (two quickstarts on localhost)
	// need a name each, or each signs the owner out of the other.
	CookieName string
}

// Sessions issues and checks owner sessions.
type Sessions struct {
	cfg   SessionConfig
	store store
	kit   *web.Kit
}

// NewSessions checks cfg and returns the sessions kept in db.
func NewSessions(cfg SessionConfig, db *sqldb.DB, kit *web.Kit) (*Sessions, error) {
	if len(cfg.Secret) < 32 {
		return nil, errors.New("controlplane: Config.JWTSecret must be at least 32 bytes")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 7 * 24 * time.Hour
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = 100
	}
	if cfg.CookieName == "" {
		cfg.CookieName = SessionCookie
	}
	if !validCookieName(cfg.CookieName) {
		return nil, fmt.Errorf("controlplane: Config.SessionCookieName %q is not a cookie name (letters, digits and !#$%%&'*+-.^_`|~)", cfg.CookieName)
	}
	return &Sessions{cfg: cfg, store: store{db}, kit: kit}, nil
}

// sessionClaims is the JWT body of a session: namespace, iat, exp, sid.
type sessionClaims struct {
	Namespace string `json:"namespace"`
	SessionID string `json:"sid"`
	jwt.RegisteredClaims
}

// Issue starts a session for the owner of namespace ns and returns
// the token that is the value of the idn_session cookie, and its expiry.
// The session is recorded in the database, so ending it there (logout,
// account deletion) refuses the token at once on every instance. An unknown
// or deactivated namespace gets no session, nor does one that has
// SessionConfig.MaxSessions live sessions.
func (s *Sessions) Issue(ctx context.Context, ns string) (token string, expires time.Time, err error) {
	return s.issueSession(ctx, ns, sessionStart{})
}

// issueSession starts a session of ns described by start; a session started
// by a passkey counts as verified by it (recent verification).
func (s *Sessions) issueSession(ctx context.Context, ns string, start sessionStart) (token string, expires time.Time, err error) {
	if err := s.store.activeNamespace(ctx, ns); err != nil {
		return "", time.Time{}, err
	}
	// The row keeps the exact start, which orders an owner's session list;
	// the token carries whole seconds.
	now := s.kit.Now()
	issued := now.Truncate(time.Second)
	expires = issued.Add(s.cfg.TTL)
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
	token, err = tok.SignedString(s.cfg.Secret)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("controlplane: sign session: %w", err)
	}
	return token, expires, nil
}

// Check authenticates a session token and returns its namespace: HS256 only, exp required, and the
// sid must still be live in the database for the same namespace.
func (s *Sessions) Check(ctx context.Context, token string) (namespace string, err error) {
	c, err := s.parseSession(token)
	if err != nil {
		return "", err
	}
	if err := s.store.checkSession(ctx, c.SessionID, c.Namespace, s.kit.Now()); err != nil {
		return "", err
	}
	return c.Namespace, nil
}

// parseSession checks a token's signature and expiry, not the database.
func (s *Sessions) parseSession(token string) (sessionClaims, error) {
	var c sessionClaims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return s.cfg.Secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(s.kit.Now))
	if err != nil || c.Namespace == "" || c.SessionID == "" {
		return sessionClaims{}, errSessionInvalid
	}
	return c, nil
}

// validCookieName reports whether name is an RFC 6265 cookie name (an
// RFC 9110 token).
func validCookieName(name string) bool {
	return name != "" && !strings.ContainsFunc(name, func(c rune) bool {
		return c > '~' || c <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c)
	})
}

// Token returns the session token the request's session cookie carries,
// or "".
func (s *Sessions) Token(r *http.Request) string {
	c, err := r.Cookie(s.cfg.CookieName)
	if err != nil {
		return ""
	}
	return c.Value
}

// Cookie builds the session cookie (SessionConfig.CookieName): HttpOnly,
// SameSite=Lax, Path=/, Secure unless Config.InsecureLocalhostCookie is
// set and the request addressed http://localhost.
func (s *Sessions) Cookie(r *http.Request, token string, expires time.Time) *http.Cookie {
	c := &http.Cookie{
		Name:     s.cfg.CookieName,
		Value:    token,
		Path:     "/",
		Expires:  expires,
		MaxAge:   int(expires.Sub(s.kit.Now()).Seconds()),
		HttpOnly: true,
		Secure:   true,
		SameSite: http.SameSiteLaxMode,
	}
	if s.cfg.InsecureLocalhostCookie && s.kit.Proxy.Scheme(r) == "http" {
		host := s.kit.Proxy.Host(r)
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if host == "localhost" {
			c.Secure = false
		}
	}
	return c
}

// clearedSessionCookie expires the session cookie in the browser.
func (s *Sessions) clearedSessionCookie(r *http.Request) *http.Cookie {
	c := s.Cookie(r, "", s.kit.Now())
	c.Expires, c.MaxAge = time.Unix(0, 0), -1
	return c
}
