package controlplane

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/mail"
	"net/smtp"
	"strings"
	"time"
)

// AlertConfig sends an e-mail through SMTP when a webhook delivery fails
// terminally, if the service owner's webhook_failures_notify setting is on,
// and whenever a passkey is added to or removed from an account (whatever
// the owner's settings: a stolen session could turn them off first). The
// zero value sends nothing; From, To and SMTPAddr are all needed to send.
type AlertConfig struct {
	// From is the sender address (WEBHOOK_ALERT_EMAIL_FROM).
	From string
	// To are the recipients (WEBHOOK_ALERT_EMAIL_TO, comma-separated).
	// Accounts have no e-mail address (passkeys only), so alerts go to
	// an operator mailbox.
	To []string
	// SMTPAddr is the mail server as host:port (WEBHOOK_ALERT_SMTP_ADDR).
	// STARTTLS is used when the server offers it.
	SMTPAddr string
	// SMTPUsername and SMTPPassword enable PLAIN authentication
	// (WEBHOOK_ALERT_SMTP_USERNAME, WEBHOOK_ALERT_SMTP_PASSWORD); net/smtp
	// sends them only over TLS or to localhost.
	SMTPUsername, SMTPPassword string
}

func (a AlertConfig) enabled() bool { return a.From != "" || len(a.To) > 0 || a.SMTPAddr != "" }

func (a AlertConfig) validate() error {
	if !a.enabled() {
		return nil
	}
	if a.From == "" || len(a.To) == 0 || a.SMTPAddr == "" {
		return errors.New("controlplane: webhook alert e-mail needs From, To and SMTPAddr together")
	}
	for _, addr := range append([]string{a.From}, a.To...) {
		if _, err := mail.ParseAddress(addr); err != nil || strings.ContainsAny(addr, "\r\n") {
			return fmt.Errorf("controlplane: webhook alert address %q is not an e-mail address", addr)
		}
	}
	if _, _, err := net.SplitHostPort(a.SMTPAddr); err != nil {
		return fmt.Errorf("controlplane: webhook alert SMTP address %q is not host:port", a.SMTPAddr)
	}
	return nil
}

// alertFailure e-mails the terminal failure of d, when alerts are
// configured and the owner wants them. Failures to send are logged.
func (s *Server) alertFailure(ctx context.Context, d delivery, attempts int, o attemptOutcome) {
	a := s.cfg.Webhooks.Alert
	if !a.enabled() {
		return
	}
	owner, ok, err := s.store.serviceOwner(ctx, d.Claim.Service)
	if err != nil {
		s.log.ErrorContext(ctx, "webhook alert: owner lookup failed", "err", err)
		return
	}
	if ok {
		notify, err := s.store.webhookFailuresNotify(ctx, owner)
		if err != nil {
			s.log.ErrorContext(ctx, "webhook alert: owner setting lookup failed", "err", err)
			return
		}
		if !notify {
			return
		}
	}
	if owner == "" {
		owner = "(deleted)"
	}
	// The URL is left out on purpose: it may carry secrets.
	subject := "idn: webhook delivery failed for service " + d.Claim.Service
	body := fmt.Sprintf("A webhook delivery failed after %d attempts and will not be retried.\r\n\r\n"+
		"Namespace owner: %s\r\nService: %s\r\nWebhook: %s\r\nDelivery (webhook-id): %s\r\nEvent: %s for claim %s\r\n"+
		"Last error: %s\r\nFailed at: %s\r\n",
		attempts, owner, d.Claim.Service, d.WebhookID, d.ID, d.EventType, d.Claim.ID, o.Err, timestamp(o.At))
	if err := sendMail(ctx, a, subject, body, s.now()); err != nil {
		s.log.ErrorContext(ctx, "webhook alert e-mail failed", "delivery_id", d.ID, "err", err)
	}
}

// alertCredentialChange e-mails that passkey pk was added or removed
// (action) in session sess, when alerts are configured. The mail is sent
// before the request is answered, even if the client has gone: it may be
// the only sign of a stolen session. Failures to send are logged.
func (s *Server) alertCredentialChange(ctx context.Context, r *http.Request, sess ownerSession, action string, pk passkey) {
	a := s.cfg.Webhooks.Alert
	if !a.enabled() {
		return
	}
	ctx = context.WithoutCancel(ctx)
	from := s.startOf(r, "")
	subject := "idn: passkey " + action + " for namespace " + sess.namespace
	body := fmt.Sprintf("A passkey was %s for namespace %s.\r\n\r\n"+
		"Passkey: %s (%s)\r\nSession: %s\r\nClient network: %s\r\nUser agent: %s\r\nAt: %s\r\n\r\n"+
		"If the owner did not do this, the session may be stolen: list the sessions (GET /v1/auth/sessions), "+
		"end the unknown ones, and remove unknown passkeys with an older one.\r\n",
		action, sess.namespace, pk.Name, pk.ID, sess.id, from.clientAddr, from.userAgent, timestamp(s.now()))
	if err := sendMail(ctx, a, subject, body, s.now()); err != nil {
		s.log.ErrorContext(ctx, "passkey alert e-mail failed", "namespace", sess.namespace, "passkey", pk.ID, "err", err)
	}
}

// sendMail delivers one plain-text message, bounded by a 30 s deadline.
func sendMail(ctx context.Context, a AlertConfig, subject, body string, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", a.SMTPAddr)
	if err != nil {
		return fmt.Errorf("controlplane: smtp dial: %w", err)
	}
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	host, _, _ := net.SplitHostPort(a.SMTPAddr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return fmt.Errorf("controlplane: smtp greeting: %w", err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(&tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}); err != nil {
			return fmt.Errorf("controlplane: smtp starttls: %w", err)
		}
	}
	if a.SMTPUsername != "" {
		if err := c.Auth(smtp.PlainAuth("", a.SMTPUsername, a.SMTPPassword, host)); err != nil {
			return fmt.Errorf("controlplane: smtp auth: %w", err)
		}
	}
	if err := c.Mail(a.From); err != nil {
		return fmt.Errorf("controlplane: smtp MAIL: %w", err)
	}
	for _, to := range a.To {
		if err := c.Rcpt(to); err != nil {
			return fmt.Errorf("controlplane: smtp RCPT: %w", err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("controlplane: smtp DATA: %w", err)
	}
	msg := "From: " + a.From + "\r\nTo: " + strings.Join(a.To, ", ") + "\r\nSubject: " + subject +
		"\r\nDate: " + now.UTC().Format(time.RFC1123Z) + "\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + body
	if _, err := w.Write([]byte(msg)); err != nil {
		return fmt.Errorf("controlplane: smtp write: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("controlplane: smtp end of data: %w", err)
	}
	return c.Quit()
}

// webhookFailuresNotify reports the webhook_failures_notify setting of
// the account owning namespace ns (true when the namespace is gone).
func (s *Store) webhookFailuresNotify(ctx context.Context, ns string) (bool, error) {
	var on int
	err := s.db.QueryRowContext(ctx, `SELECT a.webhook_failures_notify FROM accounts a
		JOIN namespaces n ON n.owner_id = a.id WHERE n.namespace = $1`, ns).Scan(&on)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	return on != 0, dbErr("webhook_failures_notify", err)
}
