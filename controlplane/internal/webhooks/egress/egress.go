// Package egress is how the control plane reaches addresses its users
// choose (webhook receivers) without becoming a way into the network it
// runs in (server-side request forgery).
//
// CheckURL refuses a target URL that names a loopback, private, link-local
// or other special-use address when it is saved. A name may later resolve
// to such an address (DNS rebinding). So NewClient's connections check the
// address again right before each connect, after name resolution. The
// client neither uses a proxy nor follows redirects. Host names resolve
// through the system resolver or, when configured, through DNS over HTTPS
// (RFC 8484).
package egress

import (
	"errors"
	"net/http"
	"time"
)

// ErrForbidden is a target refused because its address is loopback,
// private, link-local or another special-use address (the IANA
// special-purpose registries), while private targets are not allowed.
var ErrForbidden = errors.New("egress: target is a private or special-use address")

// ErrResolve is a host name that did not resolve through the DNS-over-HTTPS
// resolver.
var ErrResolve = errors.New("egress: host did not resolve")

// Config configures NewClient. Its zero value refuses private targets and
// resolves through the system resolver, without a timeout.
type Config struct {
	// AllowPrivate lets connections reach loopback, private, link-local
	// and other special-use addresses. False refuses them when dialled.
	AllowPrivate bool
	// ResolverURL is a DNS-over-HTTPS endpoint (RFC 8484, POST
	// application/dns-message). Empty means the system resolver.
	ResolverURL string
	// Timeout bounds each request (connect, TLS, send, response headers)
	// and each DNS-over-HTTPS query; zero means none.
	Timeout time.Duration
}

// NewClient returns the HTTP client that reaches user-chosen targets. Its
// connections are vetted as the package doc says. It uses no proxy, since
// a proxy would dial the target for it, past the check. It returns
// redirects as they are, since the receiver must answer itself. It fails
// only for a malformed ResolverURL.
func NewClient(c Config) (*http.Client, error) {
	var resolver *dohResolver
	if c.ResolverURL != "" {
		var err error
		if resolver, err = newDoHResolver(c.ResolverURL, c.Timeout); err != nil {
			return nil, err
		}
	}
	guard := newTargetGuard(c.AllowPrivate, resolver, c.Timeout)
	return &http.Client{
		Timeout: c.Timeout,
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           guard.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          64,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   c.Timeout,
			ResponseHeaderTimeout: c.Timeout,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}
