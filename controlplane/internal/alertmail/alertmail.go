// Package alertmail sends the control plane's alert e-mail (a webhook that
// fails for good, a passkey added or removed, a settings change that stops
// mail to an address) as plain text through SMTP (RFC 5321), with STARTTLS
// when the server offers it and PLAIN authentication when configured. Each
// alert goes to the namespace owner's address and, separately, to the
// operator copies, so neither learns the other's address.
package alertmail

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"net/smtp"
	"strings"
	"time"
)

// Config sends alert e-mail through SMTP to the namespace owner, at the
// address of their account settings ("email"), with optional copies to an
// operator mailbox:
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
type Config struct {
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

// defaultSMTPAddr is where alerts go without Config.SMTPAddr.
const defaultSMTPAddr = "localhost:25"

// Enabled reports whether alerts are sent at all.
func (c Config) Enabled() bool { return c.From != "" }

// Validate refuses copies or a server without a sender, addresses that
// are not one bare e-mail address, and a server that is not host:port.
func (c Config) Validate() error {
	if c.From == "" {
		if len(c.To) > 0 || c.SMTPAddr != "" {
			return errors.New("alertmail: alert e-mail needs From (WEBHOOK_ALERT_EMAIL_FROM) to send anything")
		}
		return nil
	}
	for _, addr := range append([]string{c.From}, c.To...) {
		if !ValidAddress(addr) {
			return fmt.Errorf("alertmail: alert address %q is not an e-mail address", addr)
		}
	}
	if c.SMTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.SMTPAddr); err != nil {
			return fmt.Errorf("alertmail: alert SMTP address %q is not host:port", c.SMTPAddr)
		}
	}
	return nil
}

// ValidAddress reports whether addr is one bare e-mail address
// (name@example.com, no display name), at most 254 bytes: what From, To
// and an owner's alert address must be.
func ValidAddress(addr string) bool {
	m, err := mail.ParseAddress(addr)
	return err == nil && m.Name == "" && m.Address == addr && len(addr) <= 254 && !strings.ContainsAny(addr, "\r\n")
}

// Notify sends one message to owner (when not "") and one to the operator
// copies (when withCopies), and logs each failure to log with logAttrs.
// It does nothing when alerts are off.
func (c Config) Notify(ctx context.Context, log *slog.Logger, now time.Time, owner string, withCopies bool, subject, body string, logAttrs ...any) {
	if !c.Enabled() {
		return
	}
	var copies []string
	if withCopies {
		copies = c.To
	}
	for _, to := range [][]string{{owner}, copies} {
		if len(to) == 0 || to[0] == "" {
			continue
		}
		if err := c.send(ctx, to, subject, body, now); err != nil {
			log.ErrorContext(ctx, "alert e-mail failed", append(logAttrs, "subject", subject, "err", err)...)
		}
	}
}

// send delivers one plain-text message to the recipients to, dated now,
// bounded by a 30 s deadline.
func (c Config) send(ctx context.Context, to []string, subject, body string, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var d net.Dialer
	addr := cmp.Or(c.SMTPAddr, defaultSMTPAddr)
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("alertmail: smtp dial: %w", err)
	}
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	host, _, _ := net.SplitHostPort(addr)
	cl, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return fmt.Errorf("alertmail: smtp greeting: %w", err)
	}
	defer cl.Close()
	if ok, _ := cl.Extension("STARTTLS"); ok {
		if err := cl.StartTLS(&tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}); err != nil {
			return fmt.Errorf("alertmail: smtp starttls: %w", err)
		}
	}
	if c.SMTPUsername != "" {
		if err := cl.Auth(smtp.PlainAuth("", c.SMTPUsername, c.SMTPPassword, host)); err != nil {
			return fmt.Errorf("alertmail: smtp auth: %w", err)
		}
	}
	if err := cl.Mail(c.From); err != nil {
		return fmt.Errorf("alertmail: smtp MAIL: %w", err)
	}
	for _, rcpt := range to {
		if err := cl.Rcpt(rcpt); err != nil {
			return fmt.Errorf("alertmail: smtp RCPT: %w", err)
		}
	}
	w, err := cl.Data()
	if err != nil {
		return fmt.Errorf("alertmail: smtp DATA: %w", err)
	}
	msg := "From: " + c.From + "\r\nTo: " + strings.Join(to, ", ") + "\r\nSubject: " + subject +
		"\r\nDate: " + now.UTC().Format(time.RFC1123Z) + "\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + body
	if _, err := w.Write([]byte(msg)); err != nil {
		return fmt.Errorf("alertmail: smtp write: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("alertmail: smtp end of data: %w", err)
	}
	return cl.Quit()
}
