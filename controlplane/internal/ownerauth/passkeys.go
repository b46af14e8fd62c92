package ownerauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/http"
	"strings"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/protocol/webauthncose"
	"github.com/go-webauthn/webauthn/webauthn"
	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/identity"
)

// credentialParams are the accepted key algorithms, in preference order.
// RS256 comes last, for authenticators that make nothing else (some
// Windows Hello ones).
var credentialParams = []protocol.CredentialParameter{
	{Type: protocol.PublicKeyCredentialType, Algorithm: webauthncose.AlgES256},
	{Type: protocol.PublicKeyCredentialType, Algorithm: webauthncose.AlgEdDSA},
	{Type: protocol.PublicKeyCredentialType, Algorithm: webauthncose.AlgRS256},
}

// ownerSession is the live session behind an owner request.
type ownerSession struct {
	namespace string
	id        string
}

// withOwnerSession wraps owner for routes that also need the session id.
func (s *Sessions) withOwnerSession(next func(http.ResponseWriter, *http.Request, ownerSession)) http.Handler {
	return s.Owner(func(w http.ResponseWriter, r *http.Request, ns string) {
		claims, err := s.parseSession(s.Token(r)) // owner has authenticated it
		if err != nil {
			s.kit.Error(w, r, answer(err))
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
func (a *Accounts) loadUser(ctx context.Context, ns string) (*webauthnUser, error) {
	id, _, _, err := a.store.account(ctx, ns)
	if err != nil {
		return nil, err
	}
	keys, err := a.store.passkeys(ctx, ns)
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
	if e := web.CheckDisplay("passkey name", n, 64); e != nil {
		return "", e
	}
	return n, nil
}

// beginRegistration starts a registration ceremony for user and stores
// its challenge bound to kind, namespace and session.
func (a *Accounts) beginRegistration(ctx context.Context, kind, sid string, user *webauthnUser) (*protocol.PublicKeyCredentialCreationOptions, error) {
	exclude := make([]protocol.CredentialDescriptor, len(user.creds))
	for i := range user.creds {
		exclude[i] = user.creds[i].Descriptor()
	}
	creation, sd, err := a.rp.BeginRegistration(user,
		webauthn.WithCredentialParameters(credentialParams), webauthn.WithExclusions(exclude))
	if err != nil {
		return nil, fmt.Errorf("controlplane: begin registration: %w", err)
	}
	if err := a.store.saveChallenge(ctx, kind, user.name, sid, sd, a.kit.Now().Add(a.cfg.ChallengeExpiry)); err != nil {
		return nil, err
	}
	return &creation.Response, nil
}

// finishRegistration verifies a registration response against the
// challenge of kind, namespace and session, which it consumes. user
// builds the account from the stored ceremony (signup has no account yet).
func (a *Accounts) finishRegistration(ctx context.Context, raw []byte, kind, ns, sid string,
	user func(webauthn.SessionData) (*webauthnUser, error)) (*webauthn.Credential, error) {
	parsed, e := parseCreation(raw)
	if e != nil {
		return nil, e
	}
	sd, err := a.store.takeChallenge(ctx, parsed.Response.CollectedClientData.Challenge, kind, ns, sid, a.kit.Now())
	if err != nil {
		return nil, err
	}
	u, err := user(sd)
	if err != nil {
		return nil, err
	}
	cred, err := a.rp.CreateCredential(u, sd, parsed)
	if err != nil {
		return nil, errWebAuthnFailed.With("details", map[string]string{"reason": protocolReason(err)})
	}
	return cred, nil
}

// beginAssertion starts an assertion ceremony over the passkeys of ns.
func (a *Accounts) beginAssertion(ctx context.Context, kind, ns, sid string) (*protocol.PublicKeyCredentialRequestOptions, error) {
	user, err := a.loadUser(ctx, ns)
	if err != nil {
		return nil, err
	}
	if len(user.creds) == 0 {
		return nil, errNoPasskeys
	}
	assertion, sd, err := a.rp.BeginLogin(user)
	if err != nil {
		return nil, fmt.Errorf("controlplane: begin login: %w", err)
	}
	if err := a.store.saveChallenge(ctx, kind, ns, sid, sd, a.kit.Now().Add(a.cfg.ChallengeExpiry)); err != nil {
		return nil, err
	}
	return &assertion.Response, nil
}

// finishAssertion verifies an assertion by a passkey of ns against the
// consumed challenge, and records its counter: a counter that did not
// increase is refused as a cloned authenticator. It returns the id of the
// passkey that signed.
func (a *Accounts) finishAssertion(ctx context.Context, raw []byte, kind, ns, sid string) (string, error) {
	parsed, e := parseAssertion(raw)
	if e != nil {
		return "", e
	}
	sd, err := a.store.takeChallenge(ctx, parsed.Response.CollectedClientData.Challenge, kind, ns, sid, a.kit.Now())
	if err != nil {
		return "", err
	}
	user, err := a.loadUser(ctx, ns)
	if err != nil {
		return "", err
	}
	cred, err := a.rp.ValidateLogin(user, sd, parsed)
	if err != nil {
		return "", errWebAuthnFailed.With("details", map[string]string{"reason": protocolReason(err)})
	}
	if cred.Authenticator.CloneWarning {
		a.kit.Log.WarnContext(ctx, "passkey counter regression refused", "namespace", ns, "credential", credentialID(cred.ID))
		return "", errPasskeyCloned
	}
	id, err := a.store.usePasskey(ctx, ns, cred, a.kit.Now())
	if errors.Is(err, errPasskeyCloned) {
		a.kit.Log.WarnContext(ctx, "passkey counter regression refused", "namespace", ns, "credential", credentialID(cred.ID))
	}
	return id, err
}

// ceremonyFailed runs record when the failure is the client's (a bad or
// replayed credential, not a database outage or a taken namespace), then
// answers err.
func (a *Accounts) ceremonyFailed(w http.ResponseWriter, r *http.Request, err error, record func(context.Context) error) {
	if status := web.Answer(answer(err)).Code().Status(); status == http.StatusBadRequest || status == http.StatusUnauthorized {
		if ferr := record(r.Context()); ferr != nil {
			a.kit.Error(w, r, answer(ferr))
			return
		}
	}
	a.kit.Error(w, r, answer(err))
}

// signupFailed answers a failed signup and backs its address off.
func (a *Accounts) signupFailed(w http.ResponseWriter, r *http.Request, err error) {
	a.ceremonyFailed(w, r, err, func(ctx context.Context) error {
		return a.store.limitFailure(ctx, a.limits.signupLimitKey(r), a.kit.Now())
	})
}

// signupOptions is GET /v1/auth/signup/options?namespace=…
func (a *Accounts) signupOptions(w http.ResponseWriter, r *http.Request) {
	ns := r.URL.Query().Get("namespace")
	if err := web.NamespaceProblem(ns); err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	if !a.limits.checkWait(w, r, a.limits.signupLimitKey(r), SignupsPerAddressPerHour) || !a.limits.checkOptions(w, r) {
		return
	}
	err := a.store.activeNamespace(r.Context(), ns)
	if err == nil || errors.Is(err, errNamespaceDeactivated) {
		a.kit.Error(w, r, answer(errNamespaceTaken))
		return
	}
	if !errors.Is(err, errNamespaceNotFound) {
		a.kit.Error(w, r, answer(err))
		return
	}
	opts, err := a.beginRegistration(r.Context(), ceremonySignup, "", &webauthnUser{id: []byte(sqldb.NewID("usr_")), name: ns})
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, opts)
}

// signup is POST /v1/auth/signup: it creates the account, the namespace
// (whose DID resolves from now on) and its first passkey, and signs in.
func (a *Accounts) signup(w http.ResponseWriter, r *http.Request) {
	if !a.kit.OriginAllowed(r) {
		apierror.Write(w, r, web.ErrOriginForbidden)
		return
	}
	key := a.limits.signupLimitKey(r)
	if !a.limits.checkWait(w, r, key, SignupsPerAddressPerHour) {
		return
	}
	var in ceremonyRequest
	if e := a.kit.Decode(w, r, &in); e != nil {
		a.signupFailed(w, r, e)
		return
	}
	if err := web.NamespaceProblem(in.Namespace); err != nil {
		a.signupFailed(w, r, err)
		return
	}
	name, e := validPasskeyName(in.PasskeyName)
	if e != nil {
		a.signupFailed(w, r, e)
		return
	}
	ctx := r.Context()
	var accountID string
	cred, err := a.finishRegistration(ctx, in.Credential, ceremonySignup, in.Namespace, "",
		func(sd webauthn.SessionData) (*webauthnUser, error) {
			accountID = string(sd.UserID)
			return &webauthnUser{id: sd.UserID, name: in.Namespace}, nil
		})
	if err != nil {
		a.signupFailed(w, r, err)
		return
	}
	// Counted only now, so options and failed ceremonies never use up an
	// address's signups; the count is atomic, so racing finishes cannot
	// exceed it.
	if !a.limits.checkAttempt(w, r, key, SignupsPerAddressPerHour) {
		return
	}
	now := a.kit.Now()
	pk, err := a.store.createAccount(ctx, in.Namespace, accountID, name, cred, now)
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	a.hooks.NamespaceCreated(ctx, in.Namespace)
	if err := a.store.limitSuccess(ctx, key); err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	token, expires, err := a.sessions.issueSession(ctx, in.Namespace, a.sessions.startOf(r, pk.ID))
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	http.SetCookie(w, a.sessions.Cookie(r, token, expires))
	apierror.WriteJSON(w, http.StatusCreated, map[string]any{
		"namespace":          in.Namespace,
		"did":                identity.DID(in.Namespace),
		"created_at":         web.Timestamp(pk.CreatedAt),
		"session_expires_at": web.Timestamp(expires),
		"passkey":            toPasskeyRecord(pk),
	})
}

// loginOptions is GET /v1/auth/login/options?namespace=…
func (a *Accounts) loginOptions(w http.ResponseWriter, r *http.Request) {
	ns := r.URL.Query().Get("namespace")
	if identity.ValidNamespace(ns) != nil {
		apierror.Write(w, r, web.ErrInvalidNamespace)
		return
	}
	a.assertionOptions(w, r, ceremonyLogin, ownerSession{namespace: ns})
}

// login is POST /v1/auth/login: a passkey assertion starts a session,
// recently verified.
func (a *Accounts) login(w http.ResponseWriter, r *http.Request) {
	if !a.kit.OriginAllowed(r) {
		apierror.Write(w, r, web.ErrOriginForbidden)
		return
	}
	var in ceremonyRequest
	if e := a.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	if identity.ValidNamespace(in.Namespace) != nil {
		apierror.Write(w, r, web.ErrInvalidNamespace)
		return
	}
	pk, ok := a.finishAssertionRequest(w, r, ceremonyLogin, ownerSession{namespace: in.Namespace}, in.Credential)
	if !ok {
		return
	}
	token, expires, err := a.sessions.issueSession(r.Context(), in.Namespace, a.sessions.startOf(r, pk))
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	http.SetCookie(w, a.sessions.Cookie(r, token, expires))
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
func (a *Accounts) assertionOptions(w http.ResponseWriter, r *http.Request, kind string, sess ownerSession) {
	// The namespace is looked up first, so made-up names leave no
	// rate-limit rows behind.
	if err := a.store.activeNamespace(r.Context(), sess.namespace); err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	if !a.limits.checkWait(w, r, a.limits.assertLimitKey(r, sess.namespace), 0) || !a.limits.checkOptions(w, r) {
		return
	}
	opts, err := a.beginAssertion(r.Context(), kind, sess.namespace, sess.id)
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, opts)
}

// finishAssertionRequest runs the finish of a login or verify ceremony
// under its limits and returns the passkey that signed; false means the
// answer has been written. A failure backs off this address for this
// namespace and counts against the address's failures everywhere; other
// addresses are not affected.
func (a *Accounts) finishAssertionRequest(w http.ResponseWriter, r *http.Request, kind string, sess ownerSession, credential []byte) (string, bool) {
	key, failures := a.limits.assertLimitKey(r, sess.namespace), a.limits.failuresLimitKey(r)
	if !a.limits.checkWait(w, r, failures, AssertFailuresPerAddressPerHour) || !a.limits.checkWait(w, r, key, 0) {
		return "", false
	}
	pk, err := a.finishAssertion(r.Context(), credential, kind, sess.namespace, sess.id)
	if err != nil {
		a.ceremonyFailed(w, r, err, func(ctx context.Context) error {
			if err := a.store.limitFailure(ctx, key, a.kit.Now()); err != nil {
				return err
			}
			_, err := a.store.limitAttempt(ctx, failures, AssertFailuresPerAddressPerHour, a.kit.Now())
			return err
		})
		return "", false
	}
	if err := a.store.limitSuccess(r.Context(), key); err != nil {
		a.kit.Error(w, r, answer(err))
		return "", false
	}
	return pk, true
}

// verifyOptions is GET /v1/auth/verify/options: an assertion ceremony
// bound to the current session.
func (a *Accounts) verifyOptions(w http.ResponseWriter, r *http.Request, sess ownerSession) {
	a.assertionOptions(w, r, ceremonyVerify, sess)
}

// verify is POST /v1/auth/verify: a passkey assertion refreshes the
// session's recent verification.
func (a *Accounts) verify(w http.ResponseWriter, r *http.Request, sess ownerSession) {
	var in ceremonyRequest
	if e := a.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	pk, ok := a.finishAssertionRequest(w, r, ceremonyVerify, sess, in.Credential)
	if !ok {
		return
	}
	now := a.kit.Now()
	if err := a.store.markVerified(r.Context(), sess.id, pk, now); err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{
		"verified_at":    web.Timestamp(now),
		"verified_until": web.Timestamp(now.Add(RecentVerification)),
	})
}

// passkeyOptions is GET /v1/auth/passkeys/options: a registration
// ceremony for another passkey of the session's account. Step-up is
// checked here already, so the owner is not asked to touch an
// authenticator for a registration that would be refused.
func (a *Accounts) passkeyOptions(w http.ResponseWriter, r *http.Request, sess ownerSession) {
	user, err := a.loadUser(r.Context(), sess.namespace)
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	if len(user.creds) > 0 && !a.requireStepUp(w, r, sess) {
		return
	}
	if !a.limits.checkOptions(w, r) {
		return
	}
	opts, err := a.beginRegistration(r.Context(), ceremonyPasskey, sess.id, user)
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, opts)
}

// addPasskey is POST /v1/auth/passkeys: a credential change, so it needs
// step-up (checked again in the transaction that stores the passkey), and
// it sends the owner alert.
func (a *Accounts) addPasskey(w http.ResponseWriter, r *http.Request, sess ownerSession) {
	var in ceremonyRequest
	if e := a.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	name, e := validPasskeyName(in.PasskeyName)
	if e != nil {
		apierror.Write(w, r, e)
		return
	}
	ctx := r.Context()
	cred, err := a.finishRegistration(ctx, in.Credential, ceremonyPasskey, sess.namespace, sess.id,
		func(webauthn.SessionData) (*webauthnUser, error) { return a.loadUser(ctx, sess.namespace) })
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	pk, err := a.store.addPasskey(ctx, sess.namespace, sess.id, name, cred, a.kit.Now())
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	a.alertCredentialChange(ctx, r, sess, "added", pk)
	apierror.WriteJSON(w, http.StatusCreated, toPasskeyRecord(pk))
}
