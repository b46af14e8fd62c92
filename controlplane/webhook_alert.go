package controlplane

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net"
	"net/smtp"
	"strings"
	"time"
)

// AlertConfig sends alert e-mail through SMTP to the namespace owner, at
// the address of their account settings ("email"), with optional copies
// to an operator mailbox:
//
//   - a webhook delivery that fails terminally, if the service owner's
//     webhook_failures_notify setting is on (the copies go with it);
//   - a passkey added to or removed from an account, to the owner if their
//     email_notifications setting is on, and to the operator copies
//     whatever the owner's settings (a stolen session could turn them off
//     first);
//   - a settings change that stops mail to the owner's address, to that
//     address.
//
// The zero value sends nothing; From alone is enough to send.
type AlertConfig struct {
	// From is the sender address (WEBHOOK_ALERT_EMAIL_FROM). Empty means
	// no alert is sent at all.
	From string
	// To are the operator copies (WEBHOOK_ALERT_EMAIL_TO,
	// comma-separated). Empty means none: alerts go to owners only.
	To []string
	// SMTPAddr is the mail server as host:port (WEBHOOK_ALERT_SMTP_ADDR).
	// Empty means localhost:25, a mail server on this host. STARTTLS is
	// used when the server offers it.
	SMTPAddr string
	// SMTPUsername and SMTPPassword enable PLAIN authentication
	// (WEBHOOK_ALERT_SMTP_USERNAME, and WEBHOOK_ALERT_SMTP_PASSWORD or
	// MAILER_API_KEY: mail services take their API key as the SMTP
	// password); net/smtp sends them only over TLS or to localhost.
	SMTPUsername, SMTPPassword string
}

// defaultSMTPAddr is where alerts go without AlertConfig.SMTPAddr.
const defaultSMTPAddr = "localhost:25"

func (a AlertConfig) enabled() bool { return a.From != "" }

func (a AlertConfig) validate() error {
	if a.From == "" {
		if len(a.To) > 0 || a.SMTPAddr != "" {
			return errors.New("controlplane: alert e-mail needs From (WEBHOOK_ALERT_EMAIL_FROM) to send anything")
		}
		return nil
	}
	for _, addr := range append([]string{a.From}, a.To...) {
		if !web.ValidMailbox(addr) {
			return fmt.Errorf("controlplane: alert address %q is not an e-mail address", addr)
		}
	}
	if a.SMTPAddr != "" {
		if _, _, err := net.SplitHostPort(a.SMTPAddr); err != nil {
			return fmt.Errorf("controlplane: alert SMTP address %q is not host:port", a.SMTPAddr)
		}
	}
	return nil
}

// alertFailure e-mails the terminal failure of d to the service owner and
// the operator copies, when the owner wants such alerts (the copies alone
// when the owner is gone). Failures to send are logged.
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
	var ownerAddr string
	if ok {
		set, err := s.accounts.Settings(ctx, owner)
		switch {
		case errors.Is(err, errNamespaceNotFound):
		case err != nil:
			s.log.ErrorContext(ctx, "webhook alert: owner setting lookup failed", "err", err)
			return
		case !set.WebhookFailuresNotify:
			return
		default:
			ownerAddr = set.Email
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
		attempts, owner, d.Claim.Service, d.WebhookID, d.ID, d.EventType, d.Claim.ID, o.Err, web.Timestamp(o.At))
	s.mail(ctx, ownerAddr, a.To, subject, body, "delivery_id", d.ID)
}

// mail sends one message to the owner's address (if any) and one to the
// operator copies (if any), logging failures with the attributes given.
func (s *Server) mail(ctx context.Context, owner string, copies []string, subject, body string, logAttrs ...any) {
	a := s.cfg.Webhooks.Alert
	for _, to := range [][]string{{owner}, copies} {
		if len(to) == 0 || to[0] == "" {
			continue
		}
		if err := sendMail(ctx, a, to, subject, body, s.now()); err != nil {
			s.log.ErrorContext(ctx, "alert e-mail failed", append(logAttrs, "subject", subject, "err", err)...)
		}
	}
}

// sendMail delivers one plain-text message, bounded by a 30 s deadline.
func sendMail(ctx context.Context, a AlertConfig, to []string, subject, body string, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var d net.Dialer
	addr := cmp.Or(a.SMTPAddr, defaultSMTPAddr)
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("controlplane: smtp dial: %w", err)
	}
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	host, _, _ := net.SplitHostPort(addr)
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
	for _, rcpt := range to {
		if err := c.Rcpt(rcpt); err != nil {
			return fmt.Errorf("controlplane: smtp RCPT: %w", err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("controlplane: smtp DATA: %w", err)
	}
	msg := "From: " + a.From + "\r\nTo: " + strings.Join(to, ", ") + "\r\nSubject: " + subject +
		"\r\nDate: " + now.UTC().Format(time.RFC1123Z) + "\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + body
	if _, err := w.Write([]byte(msg)); err != nil {
		return fmt.Errorf("controlplane: smtp write: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("controlplane: smtp end of data: %w", err)
	}
	return c.Quit()
}
