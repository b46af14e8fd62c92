package upstreamauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// Sentinels of the two ways a token cannot be had. The gateway answers
// them UPSTREAM_AUTH_UNAVAILABLE (503) and UPSTREAM_AUTH_REQUIRED (403).
var (
	// ErrUnavailable: the token endpoint is down, slow, or refused the
	// client. See UnavailableError.
	ErrUnavailable = errors.New("upstreamauth: the token endpoint is unavailable")
	// ErrAuthRequired: no account is connected for the caller, or its
	// refresh token was refused. See AuthRequiredError.
	ErrAuthRequired = errors.New("upstreamauth: an account must be connected")
)

// UnavailableError says why no token could be had and when to try again.
// Reason is a short class ("unreachable", "timeout", "status 503",
// "refused: invalid_client", "response too large"), never the endpoint's
// answer.
type UnavailableError struct {
	Connection string
	Reason     string
	RetryAfter time.Duration
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("upstreamauth: connection %q: no access token from the token endpoint (%s)", e.Connection, e.Reason)
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// AuthRequiredError says which account is missing. Subject is empty for
// a connection with one account.
type AuthRequiredError struct {
	Connection        string
	Subject           string
	NeedsReconnecting bool // the provider refused the stored refresh token
	// InsufficientScope: an MCP server refused the account's token for
	// want of Scopes (insufficient_scope); the account must be connected
	// again with them.
	InsufficientScope bool
	Scopes            []string
}

func (e *AuthRequiredError) Error() string {
	what := "no account is connected"
	switch {
	case e.InsufficientScope:
		what = "the server needs scopes the connected account was not granted (" + strconv.Quote(strings.Join(e.Scopes, " ")) + ")"
	case e.NeedsReconnecting:
		what = "the provider refused the connected account's refresh token"
	}
	if e.Subject != "" {
		what += " for subject " + strconv.Quote(e.Subject)
	}
	return fmt.Sprintf("upstreamauth: connection %q: %s; the owner must connect it: gateway connect %s%s (or the dashboard)",
		e.Connection, what, e.Connection, subjectFlag(e.Subject))
}

// Is makes errors.Is(err, ErrAuthRequired) true.
func (e *AuthRequiredError) Is(target error) bool { return target == ErrAuthRequired }

func subjectFlag(subject string) string {
	if subject == "" {
		return ""
	}
	return " --subject " + strconv.Quote(subject)
}

// errorCodePattern is what an OAuth error code may be (RFC 6749 §5.2
// allows more; anything else is not repeated).
var errorCodePattern = regexp.MustCompile(`^[a-z_]{1,64}$`)

// defaultRetryAfter is the wait an UnavailableError asks for when the
// token endpoint named none.
const defaultRetryAfter = 5 * time.Second

// maxRetryAfter bounds a Retry-After the token endpoint sends.
const maxRetryAfter = 5 * time.Minute

// classify turns a token request's failure into an error safe to show:
// an *AuthRequiredError for invalid_grant when refreshing, else an
// *UnavailableError. oauth2's own errors carry the endpoint's answer, so
// only their class survives.
func classify(conn, subject string, err error, refreshing bool) error {
	ue := &UnavailableError{Connection: conn, Reason: "unreachable", RetryAfter: defaultRetryAfter}
	var re *oauth2.RetrieveError
	var ne net.Error
	var tooLarge *responseTooLargeError
	switch {
	case errors.As(err, &re):
		if refreshing && re.ErrorCode == "invalid_grant" {
			return &AuthRequiredError{Connection: conn, Subject: subject, NeedsReconnecting: true}
		}
		switch {
		case errorCodePattern.MatchString(re.ErrorCode):
			ue.Reason = "refused: " + re.ErrorCode
		case re.Response != nil:
			ue.Reason = "status " + strconv.Itoa(re.Response.StatusCode)
		default:
			ue.Reason = "refused"
		}
		if re.Response != nil {
			ue.RetryAfter = retryAfter(re.Response.Header)
		}
	case errors.As(err, &tooLarge):
		ue.Reason = "response too large"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		ue.Reason = "timeout"
	case errors.Is(err, errRedirect):
		ue.Reason = "redirected"
	case errors.Is(err, errMalformed):
		ue.Reason = "malformed response"
	}
	return ue
}

// retryAfter reads a Retry-After in seconds, bounded; absent or bad means
// defaultRetryAfter.
func retryAfter(h http.Header) time.Duration {
	n, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || n <= 0 {
		return defaultRetryAfter
	}
	return min(time.Duration(n)*time.Second, maxRetryAfter)
}
