package admin

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/credvault"
)

// Disconnected is the answer of the account disconnect route.
type Disconnected struct {
	ConnectionID string `json:"connection_id"`
	Subject      string `json:"subject,omitempty"`
	// RevokedAtProvider: the provider confirmed the refresh token's
	// revocation (RFC 7009). False when it offers none, or failed.
	RevokedAtProvider bool `json:"revoked_at_provider"`
}

// disconnectAccount removes the account serving ?subject= (none: the
// connection's one account) and revokes its refresh token at the provider.
func (h *Handler) disconnectAccount(w http.ResponseWriter, r *http.Request) {
	d, err := h.DisconnectAccount(r.Context(), r.PathValue("id"), r.URL.Query().Get("subject"))
	h.answer(w, r, http.StatusOK, d, err)
}

// DisconnectAccount removes the account of an oauth2_authorization_code
// connection that serves subject and revokes its refresh token at the
// provider when Config.RevokeAccount is set. The account is gone even
// when revocation fails: the token is no longer stored anywhere.
func (h *Handler) DisconnectAccount(ctx context.Context, id, subject string) (*Disconnected, error) {
	res, ok := h.cfg.Vault.Lookup(id)
	if !ok {
		return nil, credvault.ErrNotFound
	}
	if res.Connection.AuthMode != credvault.AuthOAuth2AuthorizationCode {
		return nil, badRequest("connection " + id + " has no connected accounts: its auth_mode is not " + credvault.AuthOAuth2AuthorizationCode)
	}
	refresh, err := h.cfg.Vault.DisconnectAccount(ctx, id, subject)
	if err != nil {
		return nil, err
	}
	d := &Disconnected{ConnectionID: id, Subject: res.Connection.AccountSubject(subject)}
	d.RevokedAtProvider = revokeAtProvider(ctx, h.cfg.RevokeAccount, h.log, res, refresh)
	h.log.Info("admin: account disconnected", "connection", id, "revoked_at_provider", d.RevokedAtProvider,
		"request_id", apierror.RequestIDFrom(ctx))
	return d, nil
}

// revokeAtProvider revokes refresh at res's provider with revoke (nil:
// none), logging a failure (never the token); it reports whether the
// provider confirmed.
func revokeAtProvider(ctx context.Context, revoke func(context.Context, *credvault.Resolved, string) (bool, error), log *slog.Logger, res *credvault.Resolved, refresh string) bool {
	if revoke == nil || refresh == "" {
		return false
	}
	ok, err := revoke(ctx, res, refresh)
	if err != nil {
		log.Warn("admin: revoking a refresh token at the provider failed", "connection", res.Connection.ID, "err", err)
	}
	return ok
}
