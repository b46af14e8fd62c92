package ownerauth

import (
	"github.com/idnhq/idn/controlplane/internal/alertmail"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/http"

	"github.com/go-webauthn/webauthn/protocol/webauthncose"
	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/identity"
)

// passkeyRecord is a passkey as its owner sees it.
type passkeyRecord struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Algorithm  string `json:"algorithm"` // "ES256" or "EdDSA"
	CreatedAt  string `json:"created_at"`
	LastUsedAt string `json:"last_used_at,omitempty"`
}

func toPasskeyRecord(p passkey) passkeyRecord {
	return passkeyRecord{ID: p.ID, Name: p.Name, Algorithm: webauthncose.COSEAlgorithmIdentifier(p.Algorithm).String(),
		CreatedAt: web.Timestamp(p.CreatedAt), LastUsedAt: web.Timestamp(p.LastUsedAt)}
}

// me is GET /v1/auth/me.
func (a *Accounts) me(w http.ResponseWriter, r *http.Request, ns string) {
	_, created, set, err := a.store.account(r.Context(), ns)
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{
		"namespace":  ns,
		"did":        identity.DID(ns),
		"settings":   set,
		"created_at": web.Timestamp(created),
	})
}

// logout is POST /v1/auth/logout: the session row is deleted, so the token
// is refused everywhere at once, and the cookie is cleared. It answers 200
// even without a live session, so a stale browser can always log out.
func (a *Accounts) logout(w http.ResponseWriter, r *http.Request) {
	if !a.kit.OriginAllowed(r) {
		apierror.Write(w, r, web.ErrOriginForbidden)
		return
	}
	if token := a.sessions.Token(r); token != "" {
		if claims, err := a.sessions.parseSession(token); err == nil {
			if _, err := a.store.endSession(r.Context(), claims.Namespace, claims.SessionID); err != nil {
				a.kit.Error(w, r, answer(err))
				return
			}
		}
	}
	http.SetCookie(w, a.sessions.clearedSessionCookie(r))
	apierror.WriteJSON(w, http.StatusOK, map[string]bool{"logged_out": true})
}

// listPasskeys is GET /v1/auth/passkeys.
func (a *Accounts) listPasskeys(w http.ResponseWriter, r *http.Request, ns string) {
	keys, err := a.store.passkeys(r.Context(), ns)
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	out := make([]passkeyRecord, len(keys))
	for i, k := range keys {
		out[i] = toPasskeyRecord(k)
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"passkeys": out})
}

// renamePasskey is PATCH /v1/auth/passkeys/{id} with {"name"}.
func (a *Accounts) renamePasskey(w http.ResponseWriter, r *http.Request, ns string) {
	var in struct {
		Name *string `json:"name"`
	}
	if e := a.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	if in.Name == nil {
		apierror.Write(w, r, web.Validation("name is required"))
		return
	}
	name, e := validPasskeyName(in.Name)
	if e != nil {
		apierror.Write(w, r, e)
		return
	}
	p, err := a.store.renamePasskey(r.Context(), ns, r.PathValue("id"), name)
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, toPasskeyRecord(p))
}

// deletePasskey is DELETE /v1/auth/passkeys/{id}: a credential change, so
// it needs step-up; the last passkey stays. The other sessions that the
// passkey started end with it, and the owner alert is sent.
func (a *Accounts) deletePasskey(w http.ResponseWriter, r *http.Request, sess ownerSession) {
	pk, err := a.store.deletePasskey(r.Context(), sess.namespace, sess.id, r.PathValue("id"), a.kit.Now())
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	a.alertCredentialChange(r.Context(), r, sess, "removed", pk)
	w.WriteHeader(http.StatusNoContent)
}

// updateSettings is PATCH /v1/auth/settings. When the change stops mail
// to the address the owner had (notifications off, or another address),
// that address is told, since a stolen session would do this first.
func (a *Accounts) updateSettings(w http.ResponseWriter, r *http.Request, ns string) {
	var in struct {
		Email                 *string `json:"email"`
		EmailNotifications    *bool   `json:"email_notifications"`
		WebhookFailuresNotify *bool   `json:"webhook_failures_notify"`
	}
	if e := a.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	if in.Email == nil && in.EmailNotifications == nil && in.WebhookFailuresNotify == nil {
		apierror.Write(w, r, web.Validation("nothing to update: give email, email_notifications and/or webhook_failures_notify"))
		return
	}
	if in.Email != nil && *in.Email != "" && !alertmail.ValidAddress(*in.Email) {
		apierror.Write(w, r, web.Validation("email must be one e-mail address (name@example.com), at most 254 characters, or empty to remove it").With("field", "email"))
		return
	}
	_, _, before, err := a.store.account(r.Context(), ns)
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	if err := a.store.updateSettings(r.Context(), ns, in.Email, in.EmailNotifications, in.WebhookFailuresNotify); err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	_, _, set, err := a.store.account(r.Context(), ns)
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	if before.EmailNotifications && before.Email != "" && (!set.EmailNotifications || set.Email != before.Email) {
		a.alertSettingsChange(r.Context(), r, ns, before.Email, set)
	}
	apierror.WriteJSON(w, http.StatusOK, set)
}

// deleteAccount is DELETE /v1/auth/account. It needs step-up (a recent
// assertion in this session with an established passkey); then
// Hooks.DeleteAccount deletes everything the account owns and leaves the
// namespace's tombstone (DID deactivated, name never registered again).
func (a *Accounts) deleteAccount(w http.ResponseWriter, r *http.Request, sess ownerSession) {
	if !a.requireStepUp(w, r, sess) {
		return
	}
	d, err := a.hooks.DeleteAccount(r.Context(), sess.namespace)
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return
	}
	http.SetCookie(w, a.sessions.clearedSessionCookie(r))
	apierror.WriteJSON(w, http.StatusOK, map[string]any{
		"namespace":       sess.namespace,
		"did":             identity.DID(sess.namespace),
		"deactivated_at":  web.Timestamp(d.At),
		"revoked_claims":  d.Revoked,
		"rejected_claims": d.Rejected,
	})
}
