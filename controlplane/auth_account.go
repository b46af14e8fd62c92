package controlplane

import (
	"context"
	"database/sql"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/http"

	"github.com/go-webauthn/webauthn/protocol/webauthncose"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/apierror"
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
func (s *Server) me(w http.ResponseWriter, r *http.Request, ns string) {
	_, created, set, err := s.store.account(r.Context(), ns)
	if err != nil {
		s.writeErr(w, r, err)
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
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if !s.kit.OriginAllowed(r) {
		apierror.Write(w, r, web.ErrOriginForbidden)
		return
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		if claims, err := s.parseSession(c.Value); err == nil {
			if _, err := s.store.endSession(r.Context(), claims.Namespace, claims.SessionID); err != nil {
				s.writeErr(w, r, err)
				return
			}
		}
	}
	http.SetCookie(w, s.clearedSessionCookie(r))
	apierror.WriteJSON(w, http.StatusOK, map[string]bool{"logged_out": true})
}

// listPasskeys is GET /v1/auth/passkeys.
func (s *Server) listPasskeys(w http.ResponseWriter, r *http.Request, ns string) {
	keys, err := s.store.passkeys(r.Context(), ns)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	out := make([]passkeyRecord, len(keys))
	for i, k := range keys {
		out[i] = toPasskeyRecord(k)
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"passkeys": out})
}

// renamePasskey is PATCH /v1/auth/passkeys/{id} with {"name"}.
func (s *Server) renamePasskey(w http.ResponseWriter, r *http.Request, ns string) {
	var in struct {
		Name *string `json:"name"`
	}
	if e := s.kit.Decode(w, r, &in); e != nil {
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
	p, err := s.store.renamePasskey(r.Context(), ns, r.PathValue("id"), name)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, toPasskeyRecord(p))
}

// deletePasskey is DELETE /v1/auth/passkeys/{id}: a credential change, so
// it needs step-up; the last passkey stays. The other sessions that the
// passkey started end with it, and the owner alert is sent.
func (s *Server) deletePasskey(w http.ResponseWriter, r *http.Request, sess ownerSession) {
	pk, err := s.store.deletePasskey(r.Context(), sess.namespace, sess.id, r.PathValue("id"), s.now())
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	s.alertCredentialChange(r.Context(), r, sess, "removed", pk)
	w.WriteHeader(http.StatusNoContent)
}

// updateSettings is PATCH /v1/auth/settings. When the change stops mail
// to the address the owner had (notifications off, or another address),
// that address is told, since a stolen session would do this first.
func (s *Server) updateSettings(w http.ResponseWriter, r *http.Request, ns string) {
	var in struct {
		Email                 *string `json:"email"`
		EmailNotifications    *bool   `json:"email_notifications"`
		WebhookFailuresNotify *bool   `json:"webhook_failures_notify"`
	}
	if e := s.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	if in.Email == nil && in.EmailNotifications == nil && in.WebhookFailuresNotify == nil {
		apierror.Write(w, r, web.Validation("nothing to update: give email, email_notifications and/or webhook_failures_notify"))
		return
	}
	if in.Email != nil && *in.Email != "" && !validMailbox(*in.Email) {
		apierror.Write(w, r, web.Validation("email must be one e-mail address (name@example.com), at most 254 characters, or empty to remove it").With("field", "email"))
		return
	}
	_, _, before, err := s.store.account(r.Context(), ns)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if err := s.store.updateSettings(r.Context(), ns, in.Email, in.EmailNotifications, in.WebhookFailuresNotify); err != nil {
		s.writeErr(w, r, err)
		return
	}
	_, _, set, err := s.store.account(r.Context(), ns)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if before.EmailNotifications && before.Email != "" && (!set.EmailNotifications || set.Email != before.Email) {
		s.alertSettingsChange(r.Context(), r, ns, before.Email, set)
	}
	apierror.WriteJSON(w, http.StatusOK, set)
}

// deleteAccount is DELETE /v1/auth/account. It needs step-up (a recent
// assertion in this session with an established passkey). Pending claims
// are rejected and approved ones revoked through the owner's transition
// path (with their events); the account's services are deleted as DELETE
// /v1/services/{id} would; then the namespace becomes a tombstone (DID
// deactivated, name never registered again) and its passkeys, challenges
// and sessions go. Claims are moved before the tombstone so a failure
// leaves a live session to retry with; approved claims are swept once more
// after it, because an approval racing the deletion may have committed in
// between.
func (s *Server) deleteAccount(w http.ResponseWriter, r *http.Request, sess ownerSession) {
	ctx := r.Context()
	if !s.requireStepUp(w, r, sess) {
		return
	}
	ns := sess.namespace
	rejected, err := s.moveAll(ctx, ns, StatusPending, "reject")
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	revoked, err := s.moveAll(ctx, ns, StatusApproved, "revoke")
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	services, err := s.store.listServices(ctx, ns)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	for _, svc := range services {
		rev, rej, err := s.store.deleteService(ctx, ns, svc.ID, s.now())
		if err != nil && !errors.Is(err, errServiceNotFound) {
			s.writeErr(w, r, err)
			return
		}
		for _, c := range rev {
			s.publish(ctx, EventRevoked, c)
		}
		for _, c := range rej {
			s.publish(ctx, EventRejected, c)
		}
	}
	now := s.now()
	var closeGateways func(context.Context)
	err = s.store.deactivateNamespace(ctx, ns, now, func(tx *sql.Tx) (err error) {
		closeGateways, err = s.gateways.UnpairNamespace(ctx, tx, ns)
		return err
	})
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	closeGateways(ctx)
	late, err := s.moveAll(context.WithoutCancel(ctx), ns, StatusApproved, "revoke")
	if err != nil {
		s.log.ErrorContext(ctx, "account deletion: revoking late approvals failed", "namespace", ns, "err", err)
	}
	s.log.InfoContext(ctx, "account deleted", "namespace", ns, "revoked", revoked+late, "rejected", rejected)
	http.SetCookie(w, s.clearedSessionCookie(r))
	apierror.WriteJSON(w, http.StatusOK, map[string]any{
		"namespace":       ns,
		"did":             identity.DID(ns),
		"deactivated_at":  web.Timestamp(now),
		"revoked_claims":  revoked + late,
		"rejected_claims": rejected,
	})
}

// moveAll applies action to every claim of ns in status from, through the
// same transition and event path as the owner's claim routes. A claim
// that moved meanwhile (or is past its pending expiry) is skipped.
func (s *Server) moveAll(ctx context.Context, ns, from, action string) (int, error) {
	claims, err := s.store.namespaceClaims(ctx, ns, from == StatusApproved)
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, c := range claims {
		if c.Status != from {
			continue
		}
		now := s.now()
		c, err := s.store.transition(ctx, ns, c.ID, action, now.Add(-s.cfg.PendingExpiry), now)
		var te *transitionError
		if errors.As(err, &te) || errors.Is(err, errClaimNotFound) {
			continue
		}
		if err != nil {
			return moved, err
		}
		s.publish(ctx, actionEvents[action], c)
		moved++
	}
	return moved, nil
}

// maintainAuth deletes expired challenges and stale rate-limit rows; Server.Maintain runs it.
func (s *Server) maintainAuth(ctx context.Context) error {
	return s.store.cleanupAuth(ctx, s.now())
}
