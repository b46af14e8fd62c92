// Package oauthoptest is a real OpenID provider for the end-to-end tests.
package oauthoptest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Server is a real OpenID provider (zitadel/oidc's op) over an
// in-memory storage written for these tests: authorization code with
// PKCE, refresh tokens that rotate, client credentials, revocation and
// discovery. Its login page signs in whichever user the test chose.
type Server struct {
	t        testing.TB
	srv      *httptest.Server
	provider *op.Provider
	store    *opStore
}

// The provider's clients: one for authorization code, one for client
// credentials.
const (
	ClientID     = "idn-gateway"
	ClientSecret = "op-client-secret-value"
	ServiceID    = "idn-service"
	ServiceKey   = "op-service-secret-value"
)

// New starts a provider that accepts redirectURIs for ClientID.
func New(t testing.TB, redirectURIs ...string) *Server {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	a := &Server{t: t, store: &opStore{
		key: key, redirectURIs: redirectURIs,
		requests: map[string]*opAuthRequest{}, codes: map[string]string{},
		access: map[string]*opToken{}, refresh: map[string]*opToken{},
	}}
	mux := http.NewServeMux()
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	var crypto [32]byte
	_, _ = rand.Read(crypto[:])
	a.provider, err = op.NewProvider(&op.Config{CryptoKey: crypto, CodeMethodS256: true, AuthMethodPost: true, GrantTypeRefreshToken: true},
		a.store, op.StaticIssuer(a.srv.URL), op.WithAllowInsecure(),
		op.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	a.store.loginURL = a.srv.URL + "/login"
	callback := op.AuthCallbackURL(a.provider)
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("authRequestID")
		user := a.store.nextUser.Load()
		if user == nil || a.store.login(id, *user) != nil {
			http.Error(w, "no user to sign in", http.StatusForbidden)
			return
		}
		http.Redirect(w, r, callback(op.ContextWithIssuer(r.Context(), a.srv.URL), id), http.StatusFound)
	})
	mux.Handle("/", a.provider)
	return a
}

// URL is the provider's issuer.
func (a *Server) URL() string { return a.srv.URL }

// SignIn makes the login page sign in user.
func (a *Server) SignIn(user string) { a.store.nextUser.Store(&user) }

// UserOf returns the user an access token was issued to, or false for a
// token the provider does not know (any more).
func (a *Server) UserOf(bearer string) (string, bool) {
	id, err := a.provider.Crypto().Decrypt(strings.TrimPrefix(bearer, "Bearer "))
	if err != nil {
		return "", false
	}
	tokenID, _, _ := strings.Cut(id, ":")
	return a.store.accessUser(tokenID)
}

// Grant returns what a live access token grants: its user, scopes and
// expiry.
func (a *Server) Grant(bearer string) (user string, scopes []string, expires time.Time, ok bool) {
	id, err := a.provider.Crypto().Decrypt(strings.TrimPrefix(bearer, "Bearer "))
	if err != nil {
		return "", nil, time.Time{}, false
	}
	tokenID, _, _ := strings.Cut(id, ":")
	a.store.mu.Lock()
	defer a.store.mu.Unlock()
	t, ok := a.store.access[tokenID]
	if !ok || time.Now().After(t.expires) {
		return "", nil, time.Time{}, false
	}
	return t.user, slices.Clone(t.scopes), t.expires, true
}

// HasRefresh reports whether refresh is a live refresh token.
func (a *Server) HasRefresh(refresh string) bool { return a.store.hasRefresh(refresh) }

// TokenRequests counts the client credentials and refresh grants served.
func (a *Server) TokenRequests() int32 { return a.store.tokenRequests.Load() }

// RefreshTries counts the refresh grants asked for, refused ones included.
func (a *Server) RefreshTries() int32 { return a.store.refreshTries.Load() }

// ExpireAccess forgets every access token, as if each had expired.
func (a *Server) ExpireAccess() {
	a.store.mu.Lock()
	defer a.store.mu.Unlock()
	clear(a.store.access)
}

// Forget forgets a refresh token, as a provider does when access is
// revoked.
func (a *Server) Forget(refresh string) {
	a.store.mu.Lock()
	defer a.store.mu.Unlock()
	delete(a.store.refresh, refresh)
}

// RefreshTokens lists the live refresh tokens.
func (a *Server) RefreshTokens() []string {
	a.store.mu.Lock()
	defer a.store.mu.Unlock()
	return slices.Collect(maps.Keys(a.store.refresh))
}

// opStore is the provider's storage, all in memory.
type opStore struct {
	key          *rsa.PrivateKey
	loginURL     string
	redirectURIs []string
	nextUser     atomic.Pointer[string]

	mu       sync.Mutex
	requests map[string]*opAuthRequest
	codes    map[string]string   // code → request id
	access   map[string]*opToken // by token id
	refresh  map[string]*opToken // by refresh token

	tokenRequests atomic.Int32 // client credentials and refresh grants served
	refreshTries  atomic.Int32 // refresh grants asked for, refused ones included
	rotations     atomic.Int32
}

type opToken struct {
	id, user, client, refresh string
	scopes, audience          []string
	expires                   time.Time
}

type opAuthRequest struct {
	*oidc.AuthRequest
	id, user string
	done     bool
	authTime time.Time
}

func (r *opAuthRequest) GetID() string          { return r.id }
func (r *opAuthRequest) GetACR() string         { return "" }
func (r *opAuthRequest) GetAMR() []string       { return []string{"pwd"} }
func (r *opAuthRequest) GetAudience() []string  { return []string{r.ClientID} }
func (r *opAuthRequest) GetAuthTime() time.Time { return r.authTime }
func (r *opAuthRequest) GetClientID() string    { return r.ClientID }
func (r *opAuthRequest) GetCodeChallenge() *oidc.CodeChallenge {
	return &oidc.CodeChallenge{Challenge: r.CodeChallenge, Method: r.CodeChallengeMethod}
}
func (r *opAuthRequest) GetNonce() string                   { return r.Nonce }
func (r *opAuthRequest) GetRedirectURI() string             { return r.RedirectURI }
func (r *opAuthRequest) GetResponseType() oidc.ResponseType { return r.ResponseType }
func (r *opAuthRequest) GetResponseMode() oidc.ResponseMode { return r.ResponseMode }
func (r *opAuthRequest) GetScopes() []string                { return r.Scopes }
func (r *opAuthRequest) GetState() string                   { return r.State }
func (r *opAuthRequest) GetSubject() string                 { return r.user }
func (r *opAuthRequest) Done() bool                         { return r.done }

// opRefreshRequest is what a refresh token stands for.
type opRefreshRequest struct{ t *opToken }

func (r *opRefreshRequest) GetAMR() []string            { return []string{"pwd"} }
func (r *opRefreshRequest) GetAudience() []string       { return r.t.audience }
func (r *opRefreshRequest) GetAuthTime() time.Time      { return time.Time{} }
func (r *opRefreshRequest) GetClientID() string         { return r.t.client }
func (r *opRefreshRequest) GetScopes() []string         { return r.t.scopes }
func (r *opRefreshRequest) GetSubject() string          { return r.t.user }
func (r *opRefreshRequest) SetCurrentScopes(s []string) { r.t.scopes = s }

// opClient is the gateway's registered client, or the service client of
// the client credentials grant.
type opClient struct {
	id, loginURL string
	redirects    []string
	service      bool
}

func (c *opClient) GetID() string                       { return c.id }
func (c *opClient) RedirectURIs() []string              { return c.redirects }
func (c *opClient) PostLogoutRedirectURIs() []string    { return nil }
func (c *opClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeNative }
func (c *opClient) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c *opClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *opClient) GrantTypes() []oidc.GrantType {
	if c.service {
		return []oidc.GrantType{oidc.GrantTypeClientCredentials}
	}
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}
func (c *opClient) LoginURL(id string) string           { return c.loginURL + "?authRequestID=" + id }
func (c *opClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }
func (c *opClient) IDTokenLifetime() time.Duration      { return time.Hour }
func (c *opClient) DevMode() bool                       { return false }
func (c *opClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *opClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *opClient) IsScopeAllowed(string) bool           { return true }
func (c *opClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *opClient) ClockSkew() time.Duration             { return 0 }

var errNotFound = errors.New("not found")

func newID() string { return rand.Text() }

func (s *opStore) login(id, user string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok {
		return errNotFound
	}
	r.user, r.done, r.authTime = user, true, time.Now()
	return nil
}

func (s *opStore) accessUser(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.access[id]
	if !ok || time.Now().After(t.expires) {
		return "", false
	}
	return t.user, true
}

// hasRefresh reports whether refresh is a live refresh token.
func (s *opStore) hasRefresh(refresh string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.refresh[refresh]
	return ok
}

func (s *opStore) CreateAuthRequest(_ context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &opAuthRequest{AuthRequest: req, id: newID()}
	s.requests[r.id] = r
	return r, nil
}

func (s *opStore) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.requests[id]; ok {
		return r, nil
	}
	return nil, errNotFound
}

func (s *opStore) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errNotFound
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *opStore) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

func (s *opStore) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

func (s *opStore) newAccess(user, client string, scopes, audience []string) *opToken {
	t := &opToken{id: newID(), user: user, client: client, scopes: scopes, audience: audience, expires: time.Now().Add(time.Hour)}
	s.access[t.id] = t
	return t
}

func (s *opStore) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenRequests.Add(1)
	var client string
	if r, ok := req.(*opAuthRequest); ok {
		client = r.ClientID
	}
	t := s.newAccess(req.GetSubject(), client, req.GetScopes(), req.GetAudience())
	return t.id, t.expires, nil
}

// CreateAccessAndRefreshTokens rotates: a refresh token is good once.
func (s *opStore) CreateAccessAndRefreshTokens(_ context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	client := ClientID
	if current != "" {
		s.tokenRequests.Add(1)
		old, ok := s.refresh[current]
		if !ok {
			return "", "", time.Time{}, oidc.ErrInvalidGrant()
		}
		delete(s.refresh, current)
		s.rotations.Add(1)
		client = old.client
	}
	t := s.newAccess(req.GetSubject(), client, req.GetScopes(), req.GetAudience())
	t.refresh = newID()
	s.refresh[t.refresh] = t
	return t.id, t.refresh, t.expires, nil
}

func (s *opStore) TokenRequestByRefreshToken(_ context.Context, refresh string) (op.RefreshTokenRequest, error) {
	s.refreshTries.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.refresh[refresh]
	if !ok {
		return nil, errNotFound
	}
	return &opRefreshRequest{t: t}, nil
}

func (s *opStore) TerminateSession(context.Context, string, string) error { return nil }

func (s *opStore) RevokeToken(_ context.Context, token, _, client string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.refresh[token]; ok {
		if t.client != client {
			return oidc.ErrInvalidClient()
		}
		delete(s.refresh, token)
		delete(s.access, t.id)
	}
	delete(s.access, token)
	return nil
}

func (s *opStore) GetRefreshTokenInfo(_ context.Context, _, token string) (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.refresh[token]
	if !ok {
		return "", "", op.ErrInvalidRefreshToken
	}
	return t.user, t.refresh, nil
}

type opSigningKey struct{ key *rsa.PrivateKey }

func (k opSigningKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k opSigningKey) Key() any                                    { return k.key }
func (k opSigningKey) ID() string                                  { return "k1" }

type opPublicKey struct{ key *rsa.PrivateKey }

func (k opPublicKey) ID() string                         { return "k1" }
func (k opPublicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k opPublicKey) Use() string                        { return "sig" }
func (k opPublicKey) Key() any                           { return &k.key.PublicKey }

func (s *opStore) SigningKey(context.Context) (op.SigningKey, error) { return opSigningKey{s.key}, nil }
func (s *opStore) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}
func (s *opStore) KeySet(context.Context) ([]op.Key, error) { return []op.Key{opPublicKey{s.key}}, nil }

func (s *opStore) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	switch id {
	case ClientID:
		return &opClient{id: id, loginURL: s.loginURL, redirects: s.redirectURIs}, nil
	case ServiceID:
		return &opClient{id: id, service: true}, nil
	}
	return nil, errNotFound
}

func (s *opStore) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	if (id == ClientID && secret == ClientSecret) || (id == ServiceID && secret == ServiceKey) {
		return nil
	}
	return errors.New("wrong client secret")
}

func (s *opStore) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	if id != ServiceID || secret != ServiceKey {
		return nil, errors.New("wrong client secret")
	}
	return s.GetClientByClientID(ctx, id)
}

func (s *opStore) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	return &oidc.JWTTokenRequest{Subject: id, Audience: []string{id}, Scopes: scopes}, nil
}

func (s *opStore) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}
func (s *opStore) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, _, subject, _ string) error {
	info.Subject = subject
	return nil
}
func (s *opStore) SetIntrospectionFromToken(_ context.Context, in *oidc.IntrospectionResponse, _, subject, client string) error {
	in.Subject, in.ClientID, in.Active = subject, client, true
	return nil
}
func (s *opStore) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}
func (s *opStore) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errNotFound
}
func (s *opStore) ValidateJWTProfileScopes(_ context.Context, _ string, scopes []string) ([]string, error) {
	return slices.Clone(scopes), nil
}
func (s *opStore) Health(context.Context) error { return nil }

var _ op.Storage = (*opStore)(nil)
var _ op.ClientCredentialsStorage = (*opStore)(nil)
