// Package web is the HTTP plumbing every part of the control plane serves
// through. One Kit per server holds the clock, the logger, the client
// address rules, the allowed browser origins and the request body budget.
// It answers errors in the one envelope.
//
// Errors become answers in two steps. First a part maps its own sentinels
// at its handlers with a Rules table, since the storage beneath returns
// plain errors. Kit.Error then answers what is left:
//
//   - an *apierror.Error as it is;
//   - sqldb's ErrBusy and ErrUnavailable as 503s;
//   - a cancelled request not at all;
//   - anything else as a logged 500 whose detail is never echoed.
//
// Request bodies are read only once their sender is known.
// MeterBody puts every body under the budget with a 64 KiB limit. AdmitBody
// raises it to MaxBodyBytes once a route has authenticated the sender.
// Decode gives the bytes back as soon as they are decoded.
package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/bodybudget"
	"github.com/idnhq/idn/kit/clientip"
)

// Kit is the plumbing of one server. Its fields are set once, before the
// first request.
type Kit struct {
	// Log receives operational logs, never nil.
	Log *slog.Logger
	// Clock returns the current time, never nil.
	Clock func() time.Time
	// Proxy rebuilds the scheme, host and client address of a request.
	Proxy clientip.Resolver
	// PublicURL is the external base URL, "" to derive it per request.
	PublicURL string
	// Base is the path the control plane is mounted under ("" at the
	// root); Origin + Base is where its routes start.
	Base string
	// AllowedOrigins are the browser origins that may call with
	// credentials.
	AllowedOrigins []string
	// MaxBodyBytes caps an authenticated request's body.
	MaxBodyBytes int64
	// Bodies is the budget of body bytes held at once across requests.
	Bodies bodybudget.Budget
}

// Mux is where a part registers its routes.
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// OwnerHandler serves a request of the owner of namespace ns.
type OwnerHandler func(w http.ResponseWriter, r *http.Request, ns string)

// Owner wraps an OwnerHandler into a route that admits only requests with
// a live owner session (the passkey part provides it).
type Owner func(next OwnerHandler) http.Handler

// Now is the kit's clock.
func (k *Kit) Now() time.Time { return k.Clock() }

// Origin is PublicURL or the scheme and host the request addressed.
func (k *Kit) Origin(r *http.Request) string {
	if k.PublicURL != "" {
		return k.PublicURL
	}
	return k.Proxy.Scheme(r) + "://" + k.Proxy.Host(r)
}

// Error answers err (see the package doc); a cancelled request gets no
// answer.
func (k *Kit) Error(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	ae := Answer(err)
	if ae.Code().Status() >= 500 && !IsType[*apierror.Error](err) {
		k.Log.ErrorContext(r.Context(), "request failed", "path", r.URL.Path, "request_id", apierror.RequestIDFrom(r.Context()), "err", err)
	}
	apierror.Write(w, r, ae)
}

// Answer is what Error answers err with.
func Answer(err error) *apierror.Error {
	if ae, ok := errors.AsType[*apierror.Error](err); ok {
		return ae
	}
	switch {
	case errors.Is(err, sqldb.ErrBusy):
		return apierror.Coded(errcode.DatabaseBusy, "").WithRetryAfter(time.Second)
	case errors.Is(err, sqldb.ErrUnavailable):
		return ErrDatabaseUnavailable
	}
	return ErrInternal
}

// Errors every part may answer.
var (
	ErrInternal            = apierror.Coded(errcode.InternalError, "")
	ErrDatabaseUnavailable = apierror.Coded(errcode.DatabaseUnavailable, "")
	ErrUnauthenticated     = apierror.Coded(errcode.AdminUnauthorized, "a valid idn_session is required")
	ErrOriginForbidden     = apierror.Coded(errcode.OriginForbidden, "")
	ErrInvalidNamespace    = apierror.Coded(errcode.NamespaceInvalid, "")
	ErrNamespaceForbidden  = apierror.Coded(errcode.NamespaceForbidden, "")
	ErrNotFound            = apierror.Coded(errcode.NotFound, "no such route")
	ErrRateLimited         = apierror.Coded(errcode.RateLimited, "")
	ErrBodyTooLarge        = apierror.Coded(errcode.RequestBodyTooLarge, "")
	ErrUnsupportedMedia    = apierror.Coded(errcode.UnsupportedMediaType, "")
)

// Validation is a 400 VALIDATION_ERROR with a formatted message.
func Validation(format string, args ...any) *apierror.Error {
	return apierror.Coded(errcode.ValidationError, fmt.Sprintf(format, args...))
}

// RetryLater is a refusal that clears by itself after Wait, when the
// oldest item counted against a quota expires. Err is what was refused,
// for errors.Is; CodeWait answers it with a Retry-After.
type RetryLater struct {
	Err  error
	Wait time.Duration
}

// RetryUntil is the refusal err that clears at earliest, when the oldest
// item counted against a quota expires: in a second at least.
func RetryUntil(err error, earliest, now time.Time) *RetryLater {
	return &RetryLater{Err: err, Wait: max(earliest.Sub(now), time.Second)}
}

func (e *RetryLater) Error() string { return e.Err.Error() }
func (e *RetryLater) Unwrap() error { return e.Err }

// Timestamp formats t as ISO 8601 (RFC 3339, UTC), "" when zero.
func Timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// OriginAllowed is the cross-site check of mutating owner routes: no
// cross-site fetch, and an Origin, when named, in AllowedOrigins.
func (k *Kit) OriginAllowed(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return false
	}
	origin := r.Header.Get("Origin")
	return origin == "" || k.OriginListed(origin)
}

// OriginListed reports whether origin is in AllowedOrigins.
func (k *Kit) OriginListed(origin string) bool {
	for _, o := range k.AllowedOrigins {
		if strings.EqualFold(o, origin) {
			return true
		}
	}
	return false
}

// ValidOrigin reports whether o is exactly scheme://host[:port] with an
// http or https scheme.
func ValidOrigin(o string) bool {
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.User == nil && u.Path == "" && u.RawQuery == "" && u.Fragment == "" && !strings.HasSuffix(o, "?") && !strings.HasSuffix(o, "#")
}

// OwnNamespace returns the {namespace} path value when the session's owner
// owns it; otherwise it answers 400 or 403 and returns false.
func OwnNamespace(w http.ResponseWriter, r *http.Request, owner string) (string, bool) {
	ns := r.PathValue("namespace")
	if identity.ValidNamespace(ns) != nil {
		apierror.Write(w, r, ErrInvalidNamespace)
		return "", false
	}
	if ns != owner {
		apierror.Write(w, r, ErrNamespaceForbidden)
		return "", false
	}
	return ns, true
}

// ClientKey names the client of r in rate-limit keys: its address, or
// the /64 of an IPv6 one.
func (k *Kit) ClientKey(r *http.Request) string {
	a := k.Proxy.ClientAddr(r)
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	if !a.IsValid() {
		a = netip.IPv4Unspecified()
	}
	return a.String()
}

// RateLimited is the 429 answer telling the client when to come back.
func RateLimited(wait time.Duration) *apierror.Error { return ErrRateLimited.WithRetryAfter(wait) }
