package ownerauth

import (
	"context"
	"fmt"
	"net/http"

	"github.com/idnhq/idn/controlplane/internal/web"
)

// alertCredentialChange e-mails that passkey pk was added or removed
// (action) in session sess: to the owner when their email_notifications
// setting is on, and to the operator copies always. The mail is sent
// before the request is answered, even if the client has gone: it may be
// the only sign of a stolen session. Failures to send are logged.
func (a *Accounts) alertCredentialChange(ctx context.Context, r *http.Request, sess ownerSession, action string, pk passkey) {
	if a.hooks.Mail == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	var ownerAddr string
	if _, _, set, err := a.store.account(ctx, sess.namespace); err != nil {
		a.kit.Log.ErrorContext(ctx, "passkey alert: owner setting lookup failed", "err", err)
	} else if set.EmailNotifications {
		ownerAddr = set.Email
	}
	from := a.sessions.startOf(r, "")
	subject := "idn: passkey " + action + " for namespace " + sess.namespace
	body := fmt.Sprintf("A passkey was %s for namespace %s.\r\n\r\n"+
		"Passkey: %s (%s)\r\nSession: %s\r\nClient network: %s\r\nUser agent: %s\r\nAt: %s\r\n\r\n"+
		"If the owner did not do this, the session may be stolen: list the sessions (GET /v1/auth/sessions), "+
		"end the unknown ones, and remove unknown passkeys with an older one.\r\n",
		action, sess.namespace, pk.Name, pk.ID, sess.id, from.clientAddr, from.userAgent, web.Timestamp(a.kit.Now()))
	a.hooks.Mail(ctx, ownerAddr, true, subject, body, "namespace", sess.namespace, "passkey", pk.ID)
}

// alertSettingsChange tells the address the owner had (old) that a
// settings change stops mail to it: notifications turned off, or another
// address set. No operator copy: nothing about the account changed.
func (a *Accounts) alertSettingsChange(ctx context.Context, r *http.Request, ns, old string, now Settings) {
	if a.hooks.Mail == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	what := "E-mail notifications were turned off"
	if now.EmailNotifications {
		what = "Alerts now go to another address"
	}
	from := a.sessions.startOf(r, "")
	subject := "idn: alerts for namespace " + ns + " no longer come here"
	body := fmt.Sprintf("%s for namespace %s: this address gets no more alerts.\r\n\r\n"+
		"Client network: %s\r\nUser agent: %s\r\nAt: %s\r\n\r\n"+
		"If the owner did not do this, the session may be stolen: sign in with a passkey, "+
		"list the sessions (GET /v1/auth/sessions) and end the unknown ones.\r\n",
		what, ns, from.clientAddr, from.userAgent, web.Timestamp(a.kit.Now()))
	a.hooks.Mail(ctx, old, false, subject, body, "namespace", ns)
}
