package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/http"
	"net/url"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/identity"
)

// One-time sign-in links open the dashboard as an owner in one step, for
// the quickstart and tests of a local deployment, where a namespace made by
// the test seed has no passkey to log in with. They exist only where the
// test seed does (Config.TestSeedToken set, which the command allows only
// with ENVIRONMENT local or test), and both of their routes serve loopback
// clients only:
//
//   - POST /v1/test/signin-links with X-IDN-Test-Seed-Token and
//     {"namespace","next"?} answers 201 {"url","expires_at"}; the URL is
//     <base>/signin[?next=<path>]#<token>, where next is the dashboard page
//     to open (default /claims), and the token sits in the fragment so it
//     never reaches a server log, a proxy or a Referer header;
//   - POST /v1/auth/signin-link with {"token"} (sent by the /signin page)
//     consumes the link and sets the idn_session cookie.
//
// A token is 32 random bytes, stored only as its SHA-256, usable once and
// for SigninLinkTTL. The session it starts is not a passkey verification,
// so credential changes and account deletion still ask for a passkey.
const (
	SigninLinkTTL     = 10 * time.Minute
	signinTokenPrefix = "idn_sl_"
)

func (d *Dashboard) signinRoutes(m web.Mux) {
	if d.cfg.TestSeedToken != "" {
		m.Handle("POST /v1/test/signin-links", http.HandlerFunc(d.createSigninLink))
	}
	if d.cfg.TestSeedToken != "" || d.cfg.SigninLinks {
		m.Handle("POST /v1/auth/signin-link", http.HandlerFunc(d.redeemSigninLink))
	}
}

// createSigninLink is POST /v1/test/signin-links. Like the seed route, a
// request that is not from loopback or lacks the seed token gets the 404 of
// a missing route.
func (d *Dashboard) createSigninLink(w http.ResponseWriter, r *http.Request) {
	tok := r.Header.Get("X-IDN-Test-Seed-Token")
	if !d.kit.Proxy.IsLoopback(r) || subtle.ConstantTimeCompare([]byte(tok), []byte(d.cfg.TestSeedToken)) != 1 {
		apierror.Write(w, r, web.ErrNotFound)
		return
	}
	var in struct {
		Namespace string `json:"namespace"`
		Next      string `json:"next"`
	}
	if e := d.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	page := "/signin"
	if in.Next != "" {
		if safeNext(in.Next) != in.Next {
			apierror.Write(w, r, web.Validation("next must be a path of this dashboard, such as /claims?status=approved"))
			return
		}
		page += "?" + url.Values{"next": {in.Next}}.Encode()
	}
	path, expires, err := d.SigninLink(r.Context(), in.Namespace, page)
	if err != nil {
		d.kit.Error(w, r, errorRules.Answer(err))
		return
	}
	apierror.WriteJSON(w, http.StatusCreated, map[string]string{
		"url":        d.kit.Origin(r) + path,
		"expires_at": web.Timestamp(expires),
	})
}

// SigninLink makes a one-time link that opens the dashboard page (a path
// such as /signin?next=/claims, under the base path) as the owner of
// namespace ns, and returns its path and fragment, to append to the
// dashboard's origin, and its expiry. The redemption route exists when
// Config.SigninLinks (or the test seed) is set.
func (d *Dashboard) SigninLink(ctx context.Context, ns, page string) (path string, expires time.Time, err error) {
	if identity.ValidNamespace(ns) != nil {
		return "", time.Time{}, web.ErrInvalidNamespace
	}
	if err := d.claims.Active(ctx, ns); err != nil {
		return "", time.Time{}, err
	}
	var b [32]byte
	rand.Read(b[:])
	token := signinTokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	now := d.kit.Now()
	expires = now.Add(SigninLinkTTL)
	if err := d.store.createSigninLink(ctx, ns, token, now, expires); err != nil {
		return "", time.Time{}, err
	}
	return d.cfg.Base + page + "#" + token, expires, nil
}

// redeemSigninLink is POST /v1/auth/signin-link: the link's token starts a
// session of its namespace, once.
func (d *Dashboard) redeemSigninLink(w http.ResponseWriter, r *http.Request) {
	if !d.kit.Proxy.IsLoopback(r) {
		apierror.Write(w, r, web.ErrNotFound)
		return
	}
	if !d.kit.OriginAllowed(r) {
		apierror.Write(w, r, web.ErrOriginForbidden)
		return
	}
	var in struct {
		Token string `json:"token"`
	}
	if e := d.kit.Decode(w, r, &in); e != nil {
		apierror.Write(w, r, e)
		return
	}
	ns, err := d.store.takeSigninLink(r.Context(), in.Token, d.kit.Now())
	if err != nil {
		d.kit.Error(w, r, errorRules.Answer(err))
		return
	}
	token, expires, err := d.sessions.Issue(r.Context(), ns)
	if err != nil {
		d.kit.Error(w, r, errorRules.Answer(err))
		return
	}
	http.SetCookie(w, d.sessions.Cookie(r, token, expires))
	apierror.WriteJSON(w, http.StatusOK, map[string]string{
		"namespace":          ns,
		"did":                identity.DID(ns),
		"session_expires_at": web.Timestamp(expires),
	})
}
