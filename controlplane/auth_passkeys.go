package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/protocol/webauthncose"
	"github.com/go-webauthn/webauthn/webauthn"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/apierror"
)

// AuthConfig configures passkey accounts (WebAuthn).
type AuthConfig struct {
	// Origins are the origins (scheme://host[:port]) where the dashboard
	// runs passkey ceremonies (WEBAUTHN_ALLOWED_ORIGINS): a credential whose
	// client data names another origin is refused. Empty disables the
	// ceremony routes (signup, login, adding a passkey, verification),
	// which then answer 404; the other /v1/auth routes still work for
	// sessions issued otherwise (IssueSession, the test seed).
	Origins []string
	// RPID is the WebAuthn relying-party ID (WEBAUTHN_RP_ID): every origin's
	// host must equal it or be a subdomain of it. Empty means the host of
	// Origins[0].
	RPID string
	// RPName is the relying-party name that authenticators show; empty
	// means "idn".
	RPName string
	// ChallengeExpiry is how long a ceremony's challenge stays usable
	// (CHALLENGE_EXPIRY_HOURS); zero means 1 hour. Server.Maintain deletes
	// expired ones.
	ChallengeExpiry time.Duration

	rp *webauthn.WebAuthn // built by New from the fields above
}

// credentialParams are the accepted key algorithms, in preference order.
var credentialParams = []protocol.CredentialParameter{
	{Type: protocol.PublicKeyCredentialType, Algorithm: webauthncose.AlgES256},
	{Type: protocol.PublicKeyCredentialType, Algorithm: webauthncose.AlgEdDSA},
}

func (s *Server) initAuth() error {
	a := &s.cfg.Auth
	setDefault(&a.ChallengeExpiry, time.Hour)
	setDefault(&a.RPName, "idn")
	if len(a.Origins) == 0 {
		return nil
	}
	for _, o := range a.Origins {
		if !web.ValidOrigin(o) {
			return fmt.Errorf("controlplane: WebAuthn origin %q is not scheme://host[:port]", o)
		}
	}
	if a.RPID == "" {
		u, _ := url.Parse(a.Origins[0])
		a.RPID = strings.ToLower(u.Hostname())
	}
	for _, o := range a.Origins {
		u, _ := url.Parse(o)
		if h := strings.ToLower(u.Hostname()); h != a.RPID && !strings.HasSuffix(h, "."+a.RPID) {
			return fmt.Errorf("controlplane: WebAuthn origin %q is outside the relying-party ID %q", o, a.RPID)
		}
	}
	rp, err := webauthn.New(&webauthn.Config{
		RPID:                  a.RPID,
		RPDisplayName:         a.RPName,
		RPOrigins:             a.Origins,
		AttestationPreference: protocol.PreferNoAttestation,
		AuthenticatorSelection: protocol.AuthenticatorSelection{
			ResidentKey:      protocol.ResidentKeyRequirementPreferred,
			UserVerification: protocol.VerificationPreferred,
		},
	})
	if err != nil {
		return fmt.Errorf("controlplane: WebAuthn configuration: %w", err)
	}
	a.rp = rp
	return nil
}

func (s *Server) authRoutes(m *routeMux) {
	m.Handle("GET /v1/auth/me", s.owner(s.me))
	m.HandleFunc("POST /v1/auth/logout", s.logout)
	m.Handle("GET /v1/auth/passkeys", s.owner(s.listPasskeys))
	m.Handle("PATCH /v1/auth/passkeys/{id}", s.owner(s.renamePasskey))
	m.Handle("DELETE /v1/auth/passkeys/{id}", s.withOwnerSession(s.deletePasskey))
	m.Handle("PATCH /v1/auth/settings", s.owner(s.updateSettings))
	m.Handle("GET /v1/auth/sessions", s.withOwnerSession(s.listSessions))
	m.Handle("DELETE /v1/auth/sessions/{id}", s.withOwnerSession(s.endSessionRoute))
	m.Handle("DELETE /v1/auth/account", s.withOwnerSession(s.deleteAccount))
	if s.cfg.Auth.rp == nil {
		return
	}
	m.HandleFunc("GET /v1/auth/signup/options", s.signupOptions)
	m.HandleFunc("POST /v1/auth/signup", s.signup)
	m.HandleFunc("GET /v1/auth/login/options", s.loginOptions)
	m.HandleFunc("POST /v1/auth/login", s.login)
	m.Handle("GET /v1/auth/passkeys/options", s.withOwnerSession(s.passkeyOptions))
	m.Handle("POST /v1/auth/passkeys", s.withOwnerSession(s.addPasskey))
	m.Handle("GET /v1/auth/verify/options", s.withOwnerSession(s.verifyOptions))
	m.Handle("POST /v1/auth/verify", s.withOwnerSession(s.verify))
}

// ownerSession is the live session behind an owner request.
type ownerSession struct {
	namespace string
	id        string
}

// withOwnerSession wraps owner for routes that also need the session id.
func (s *Server) withOwnerSession(next func(http.ResponseWriter, *http.Request, ownerSession)) http.Handler {
	return s.owner(func(w http.ResponseWriter, r *http.Request, ns string) {
		c, err := r.Cookie(SessionCookie) // owner has authenticated it
		if err != nil {
			apierror.Write(w, r, web.ErrUnauthenticated)
			return
		}
		claims, err := s.parseSession(c.Value)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		next(w, r, ownerSession{namespace: ns, id: claims.SessionID})
	})
}

// webauthnUser is an account as the WebAuthn library sees it. The user
// handle is the account id: random, stable and free of personal data.
type webauthnUser struct {
	id    []byte
	name  string
	creds []webauthn.Credential
}

func (u *webauthnUser) WebAuthnID() []byte                         { return u.id }
func (u *webauthnUser) WebAuthnName() string                       { return u.name }
func (u *webauthnUser) WebAuthnDisplayName() string                { return u.name }
func (u *webauthnUser) WebAuthnCredentials() []webauthn.Credential { return u.creds }

var _ webauthn.User = (*webauthnUser)(nil)

// loadUser returns the account owning ns with its passkeys.
func (s *Server) loadUser(ctx context.Context, ns string) (*webauthnUser, error) {
	id, _, _, err := s.store.account(ctx, ns)
	if err != nil {
		return nil, err
	}
	keys, err := s.store.passkeys(ctx, ns)
	if err != nil {
		return nil, err
	}
	u := &webauthnUser{id: []byte(id), name: ns}
	for _, k := range keys {
		u.creds = append(u.creds, k.Credential)
	}
	return u, nil
}

// ceremonyRequest is the body of the finishing POSTs of every ceremony.
type ceremonyRequest struct {
	Namespace   string          `json:"namespace"`
	PasskeyName *string         `json:"passkey_name"`
	Credential  json.RawMessage `json:"credential"`
}

// parseCreation decodes the PublicKeyCredential JSON of a registration.
func parseCreation(raw []byte) (*protocol.ParsedCredentialCreationData, *apierror.Error) {
	return parseCredential(raw, protocol.ParseCredentialCreationResponseBytes)
}

// parseAssertion decodes the PublicKeyCredential JSON of an assertion.
func parseAssertion(raw []byte) (*protocol.ParsedCredentialAssertionData, *apierror.Error) {
	return parseCredential(raw, protocol.ParseCredentialRequestResponseBytes)
}

// parseCredential decodes a ceremony's credential with parse, answering
// CREDENTIAL_INVALID for a missing or malformed one.
func parseCredential[T any](raw []byte, parse func([]byte) (T, error)) (T, *apierror.Error) {
	var zero T
	if len(raw) == 0 || string(raw) == "null" {
		return zero, errCredentialBad.With("details", map[string]string{"reason": "credential is required"})
	}
	p, err := parse(raw)
	if err != nil {
		return zero, errCredentialBad.With("details", map[string]string{"reason": protocolReason(err)})
	}
	return p, nil
}

// protocolReason is the library's short explanation of a failed check,
// without its debug text (which may echo input values).
func protocolReason(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Details != "" {
		return pe.Details
	}
	return "malformed credential"
}

// validPasskeyName returns the trimmed name, "Passkey" when nil or empty.
func validPasskeyName(name *string) (string, *apierror.Error) {
	if name == nil || strings.TrimSpace(*name) == "" {
		return "Passkey", nil
	}
	n := strings.TrimSpace(*name)
	if e := checkDisplay("passkey name", n, 64); e != nil {
		return "", e
	}
	return n, nil
}

// beginRegistration starts a registration ceremony for user and stores
// its challenge bound to kind, namespace and session.
func (s *Server) beginRegistration(ctx context.Context, kind, sid string, user *webauthnUser) (*protocol.PublicKeyCredentialCreationOptions, error) {
	exclude := make([]protocol.CredentialDescriptor, len(user.creds))
	for i := range user.creds {
		exclude[i] = user.creds[i].Descriptor()
	}
	creation, sd, err := s.cfg.Auth.rp.BeginRegistration(user,
		webauthn.WithCredentialParameters(credentialParams), webauthn.WithExclusions(exclude))
	if err != nil {
		return nil, fmt.Errorf("controlplane: begin registration: %w", err)
	}
	if err := s.store.saveChallenge(ctx, kind, user.name, sid, sd, s.now().Add(s.cfg.Auth.ChallengeExpiry)); err != nil {
		return nil, err
	}
	return &creation.Response, nil
}

// finishRegistration verifies a registration response against the
// challenge of kind, namespace and session, which it consumes. user
// builds the account from the stored ceremony (signup has no account yet).
func (s *Server) finishRegistration(ctx context.Context, raw []byte, kind, ns, sid string,
	user func(webauthn.SessionData) (*webauthnUser, error)) (*webauthn.Credential, error) {
	parsed, e := parseCreation(raw)
	if e != nil {
		return nil, e
	}
	sd, err := s.store.takeChallenge(ctx, parsed.Response.CollectedClientData.Challenge, kind, ns, sid, s.now())
	if err != nil {
		return nil, err
	}
	u, err := user(sd)
	if err != nil {
		return nil, err
	}
	cred, err := s.cfg.Auth.rp.CreateCredential(u, sd, parsed)
	if err != nil {
		return nil, errWebAuthnFailed.With("details", map[string]string{"reason": protocolReason(err)})
	}
	return cred, nil
}

// beginAssertion starts an assertion ceremony over the passkeys of ns.
func (s *Server) beginAssertion(ctx context.Context, kind, ns, sid string) (*protocol.PublicKeyCredentialRequestOptions, error) {
	user, err := s.loadUser(ctx, ns)
	if err != nil {
		return nil, err
	}
	if len(user.creds) == 0 {
		return nil, errNoPasskeys
	}
	assertion, sd, err := s.cfg.Auth.rp.BeginLogin(user)
	if err != nil {
		return nil, fmt.Errorf("controlplane: begin login: %w", err)
	}
	if err := s.store.saveChallenge(ctx, kind, ns, sid, sd, s.now().Add(s.cfg.Auth.ChallengeExpiry)); err != nil {
		return nil, err
	}
	return &assertion.Response, nil
}

// finishAssertion verifies an assertion by a passkey of ns against the
// consumed challenge, and records its counter: a counter that did not
// increase is refused as a cloned authenticator. It returns the id of the
// passkey that signed.
func (s *Server) finishAssertion(ctx context.Context, raw []byte, kind, ns, sid string) (string, error) {
	parsed, e := parseAssertion(raw)
	if e != nil {
		return "", e
	}
	sd, err := s.store.takeChallenge(ctx, parsed.Response.CollectedClientData.Challenge, kind, ns, sid, s.now())
	if err != nil {
		return "", err
	}
	user, err := s.loadUser(ctx, ns)
	if err != nil {
		return "", err
	}
	cred, err := s.cfg.Auth.rp.ValidateLogin(user, sd, parsed)
	if err != nil {
		return "", errWebAuthnFailed.With("details", map[string]string{"reason": protocolReason(err)})
	}
	if cred.Authenticator.CloneWarning {
		s.log.WarnContext(ctx, "passkey counter regression refused", "namespace", ns, "credential", credentialID(cred.ID))
		return "", errPasskeyCloned
	}
	id, err := s.store.usePasskey(ctx, ns, cred, s.now())
	if errors.Is(err, errPasskeyCloned) {
		s.log.WarnContext(ctx, "passkey counter regression refused", "namespace", ns, "credential", credentialID(cred.ID))
	}
	return id, err
}

// ceremonyFailed runs record when the failure is the client's (a bad or
// replayed credential, not a database outage or a taken namespace), then
// answers err.
func (s *Server) ceremonyFailed(w http.ResponseWriter, r *http.Request, err error, record func(context.Context) error) {
	if status := toAPIError(err).Code().Status(); status == http.StatusBadRequest || status == http.StatusUnauthorized {
		if ferr := record(r.Context()); ferr != nil {
			s.writeErr(w, r, ferr)
			return
		}
	}
	s.writeErr(w, r, err)
}

// signupFailed answers a failed signup and backs its address off.
func (s *Server) signupFailed(w http.ResponseWriter, r *http.Request, err error) {
	s.ceremonyFailed(w, r, err, func(ctx context.Context) error {
		return s.store.limitFailure(ctx, s.signupLimitKey(r), s.now())
	})
}

// signupOptions is GET /v1/auth/signup/options?namespace=…
func (s *Server) signupOptions(w http.ResponseWriter, r *http.Request) {
	ns := r.URL.Query().Get("namespace")
	if err := newNamespaceProblem(ns); err != nil {
		s.writeErr(w, r, err)
		return
	}
	if !s.checkWait(w, r, s.signupLimitKey(r), signupsPerAddressPerHour) || !s.checkOptions(w, r) {
		return
	}
	_, err := s.store.namespace(r.Context(), ns)
	if err == nil {
		s.writeErr(w, r, errNamespaceTaken)
		return
	}
	if !errors.Is(err, errNamespaceNotFound) {
		s.writeErr(w, r, err)
		return
	}
	opts, err := s.beginRegistration(r.Context(), ceremonySignup, "", &webauthnUser{id: []byte(sqldb.NewID("usr_")), name: ns})
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, opts)
}

// signup is POST /v1/auth/signup: it creates the account, the namespace
// (whose DID resolves from now on) and its first passkey, and signs in.
func (s *Server) signup(w http.ResponseWriter, r *http.Request) {
	if !s.kit.OriginAllowed(r) {
		apierror.Write(w, r, web.ErrOriginForbidden)
		return
	}
	key := s.signupLimitKey(r)
	if !s.checkWait(w, r, key, signupsPerAddressPerHour) {
		return
	}
	var in ceremonyRequest
	if e := s.kit.Decode(w, r, &in); e != nil {
		s.signupFailed(w, r, e)
		return
	}
	if err := newNamespaceProblem(in.Namespace); err != nil {
		s.signupFailed(w, r, err)
		return
	}
	name, e := validPasskeyName(in.PasskeyName)
	if e != nil {
		s.signupFailed(w, r, e)
		return
	}
	ctx := r.Context()
	var accountID string
	cred, err := s.finishRegistration(ctx, in.Credential, ceremonySignup, in.Namespace, "",
		func(sd webauthn.SessionData) (*webauthnUser, error) {
			accountID = string(sd.UserID)
			return &webauthnUser{id: sd.UserID, name: in.Namespace}, nil
		})
	if err != nil {
		s.signupFailed(w, r, err)
		return
	}
	// Counted only now, so options and failed ceremonies never use up an
	// address's signups; the count is atomic, so racing finishes cannot
	// exceed it.
	if !s.checkAttempt(w, r, key, signupsPerAddressPerHour) {
		return
	}
	now := s.now()
	pk, err := s.store.createAccount(ctx, in.Namespace, accountID, name, cred, now)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	s.namespaceCreated(ctx, in.Namespace)
	if err := s.store.limitSuccess(ctx, key); err != nil {
		s.writeErr(w, r, err)
		return
	}
	token, expires, err := s.issueSession(ctx, in.Namespace, s.startOf(r, pk.ID))
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	http.SetCookie(w, s.sessionCookie(r, token, expires))
	apierror.WriteJSON(w, http.StatusCreated, map[string]any{
		"namespace":          in.Namespace,
		"did":                identity.DID(in.Namespace),
		"created_at":         web.Timestamp(pk.CreatedAt),
		"session_expires_at": web.Timestamp(expires),
		"passkey":            toPasskeyRecord(pk),
	})
}

// loginOptions is GET /v1/auth/login/options?namespace=…
func (s *Server) loginOptions(w http.ResponseWriter, r *http.Request) {
	ns := r.URL.Query().Get("namespace")
	if identity.ValidNamespace(ns) != nil {
		apierror.Write(w, r, web.ErrInvalidNamespace)
		return
	}
	s.assertionOptions(w, r, ceremonyLogin, ownerSession{namespace: ns})
}

// login is POST /v1/auth/login: a passkey assertion starts a session,
// recently verified.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !s.kit.OriginAllowed(r) {
		apierror.Write(w, r, web.ErrOriginForbidden)
		return
	}
	var in ceremonyRequest
	if e := s.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	if identity.ValidNamespace(in.Namespace) != nil {
		apierror.Write(w, r, web.ErrInvalidNamespace)
		return
	}
	pk, ok := s.finishAssertionRequest(w, r, ceremonyLogin, ownerSession{namespace: in.Namespace}, in.Credential)
	if !ok {
		return
	}
	token, expires, err := s.issueSession(r.Context(), in.Namespace, s.startOf(r, pk))
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	http.SetCookie(w, s.sessionCookie(r, token, expires))
	apierror.WriteJSON(w, http.StatusOK, map[string]any{
		"namespace":          in.Namespace,
		"did":                identity.DID(in.Namespace),
		"session_expires_at": web.Timestamp(expires),
	})
}

// assertionOptions answers the request options of a login or verify
// ceremony. Options are not attempts: they count only against the
// address's options budget, and are refused early while this address is
// backing off for the namespace (its finish would be refused anyway).
func (s *Server) assertionOptions(w http.ResponseWriter, r *http.Request, kind string, sess ownerSession) {
	// The namespace is looked up first, so made-up names leave no
	// rate-limit rows behind.
	rec, err := s.store.namespace(r.Context(), sess.namespace)
	if err == nil && !rec.Deactivated.IsZero() {
		err = errNamespaceDeactivated
	}
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if !s.checkWait(w, r, s.assertLimitKey(r, sess.namespace), 0) || !s.checkOptions(w, r) {
		return
	}
	opts, err := s.beginAssertion(r.Context(), kind, sess.namespace, sess.id)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, opts)
}

// finishAssertionRequest runs the finish of a login or verify ceremony
// under its limits and returns the passkey that signed; false means the
// answer has been written. A failure backs off this address for this
// namespace and counts against the address's failures everywhere; other
// addresses are not affected.
func (s *Server) finishAssertionRequest(w http.ResponseWriter, r *http.Request, kind string, sess ownerSession, credential []byte) (string, bool) {
	key, failures := s.assertLimitKey(r, sess.namespace), s.failuresLimitKey(r)
	if !s.checkWait(w, r, failures, assertFailuresPerAddressPerHour) || !s.checkWait(w, r, key, 0) {
		return "", false
	}
	pk, err := s.finishAssertion(r.Context(), credential, kind, sess.namespace, sess.id)
	if err != nil {
		s.ceremonyFailed(w, r, err, func(ctx context.Context) error {
			if err := s.store.limitFailure(ctx, key, s.now()); err != nil {
				return err
			}
			_, err := s.store.limitAttempt(ctx, failures, assertFailuresPerAddressPerHour, s.now())
			return err
		})
		return "", false
	}
	if err := s.store.limitSuccess(r.Context(), key); err != nil {
		s.writeErr(w, r, err)
		return "", false
	}
	return pk, true
}

// verifyOptions is GET /v1/auth/verify/options: an assertion ceremony
// bound to the current session.
func (s *Server) verifyOptions(w http.ResponseWriter, r *http.Request, sess ownerSession) {
	s.assertionOptions(w, r, ceremonyVerify, sess)
}

// verify is POST /v1/auth/verify: a passkey assertion refreshes the
// session's recent verification.
func (s *Server) verify(w http.ResponseWriter, r *http.Request, sess ownerSession) {
	var in ceremonyRequest
	if e := s.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	pk, ok := s.finishAssertionRequest(w, r, ceremonyVerify, sess, in.Credential)
	if !ok {
		return
	}
	now := s.now()
	if err := s.store.markVerified(r.Context(), sess.id, pk, now); err != nil {
		s.writeErr(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{
		"verified_at":    web.Timestamp(now),
		"verified_until": web.Timestamp(now.Add(recentVerification)),
	})
}

// passkeyOptions is GET /v1/auth/passkeys/options: a registration
// ceremony for another passkey of the session's account. Step-up is
// checked here already, so the owner is not asked to touch an
// authenticator for a registration that would be refused.
func (s *Server) passkeyOptions(w http.ResponseWriter, r *http.Request, sess ownerSession) {
	user, err := s.loadUser(r.Context(), sess.namespace)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if len(user.creds) > 0 && !s.requireStepUp(w, r, sess) {
		return
	}
	if !s.checkOptions(w, r) {
		return
	}
	opts, err := s.beginRegistration(r.Context(), ceremonyPasskey, sess.id, user)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, opts)
}

// addPasskey is POST /v1/auth/passkeys: a credential change, so it needs
// step-up (checked again in the transaction that stores the passkey), and
// it sends the owner alert.
func (s *Server) addPasskey(w http.ResponseWriter, r *http.Request, sess ownerSession) {
	var in ceremonyRequest
	if e := s.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	name, e := validPasskeyName(in.PasskeyName)
	if e != nil {
		apierror.Write(w, r, e)
		return
	}
	ctx := r.Context()
	cred, err := s.finishRegistration(ctx, in.Credential, ceremonyPasskey, sess.namespace, sess.id,
		func(webauthn.SessionData) (*webauthnUser, error) { return s.loadUser(ctx, sess.namespace) })
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	pk, err := s.store.addPasskey(ctx, sess.namespace, sess.id, name, cred, s.now())
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	s.alertCredentialChange(ctx, r, sess, "added", pk)
	apierror.WriteJSON(w, http.StatusCreated, toPasskeyRecord(pk))
}
