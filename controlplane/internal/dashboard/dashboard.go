// Package dashboard is the owner dashboard: HTML pages rendered from the
// other parts' read APIs, and small ES modules (web/static) that run every
// action through the JSON API, the same routes any other client calls.
// Nothing is built at compile time and nothing is loaded from another
// origin. It also serves the one-time sign-in links (signin.go).
package dashboard

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/claims"
	"github.com/idnhq/idn/controlplane/internal/ownerauth"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/actions"
	"github.com/idnhq/idn/controlplane/internal/activity"
	"github.com/idnhq/idn/controlplane/internal/gatewaylink"
	"github.com/idnhq/idn/controlplane/internal/webhooks"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/identity/display"
)

// Config configures the dashboard.
type Config struct {
	// MaxAPIKeys is the active keys allowed per service, shown beside them.
	MaxAPIKeys int
	// ExplorerURL is the base of the chain's block explorer; a claim's
	// registry transactions link to ExplorerURL + "/tx/" + hash. Empty
	// shows the hashes unlinked.
	ExplorerURL string
	// TestSeedToken, when set, serves POST /v1/test/signin-links to
	// loopback clients presenting it, and the links' redemption.
	TestSeedToken string
	// SigninLinks serves the redemption of the links SigninLink makes.
	SigninLinks bool
	// Base is the path the control plane is mounted under ("/idn"), ""
	// at the root: every link, redirect and script request carries it.
	Base string
}

// Deps are the parts whose data the pages show.
type Deps struct {
	DB       *sqldb.DB
	Kit      *web.Kit
	Sessions *ownerauth.Sessions
	Accounts *ownerauth.Accounts
	Claims   *claims.Core
	Webhooks *webhooks.Manager
	Gateways *gatewaylink.Link
	Activity *activity.Activity
	Actions  *actions.Actions
}

// Dashboard serves the owner's pages.
type Dashboard struct {
	cfg      Config
	store    store
	kit      *web.Kit
	sessions *ownerauth.Sessions
	accounts *ownerauth.Accounts
	claims   *claims.Core
	webhooks *webhooks.Manager
	gateways *gatewaylink.Link
	activity *activity.Activity
	actions  *actions.Actions
}

// New returns the dashboard of cfg over deps.
func New(cfg Config, deps Deps) *Dashboard {
	return &Dashboard{cfg: cfg, store: store{deps.DB}, kit: deps.Kit, sessions: deps.Sessions, accounts: deps.Accounts,
		claims: deps.Claims, webhooks: deps.Webhooks, gateways: deps.Gateways,
		activity: deps.Activity, actions: deps.Actions}
}

// store holds the sign-in links.
type store struct{ db *sqldb.DB }

//go:embed web/templates/*.html web/static/*
var webFiles embed.FS

// dashboardCSP allows scripts, styles, images and fetches from the
// dashboard's own origin only: no inline code, no eval, no framing.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// PageSize is the number of claims a page of the claims view shows.
const PageSize = 50

// staticAsset is an embedded file with its content type.
type staticAsset struct {
	body  []byte
	ctype string
}

// dashboardUI is the parsed templates and the static files, versioned by a
// hash of their content so browsers may cache them for good.
type dashboardUI struct {
	pages   map[string]*template.Template
	assets  map[string]staticAsset
	version string
}

var dashboard = mustLoadDashboard()

// AssetsPath is the URL path prefix of the static files, versioned by
// their content.
func AssetsPath() string { return "/assets/" + dashboard.version }

func mustLoadDashboard() *dashboardUI {
	ui, err := loadDashboard(webFiles)
	if err != nil {
		panic(err) // the files are embedded: a failure is a build defect, caught by every test
	}
	return ui
}

func loadDashboard(files fs.FS) (*dashboardUI, error) {
	ui := &dashboardUI{pages: map[string]*template.Template{}, assets: map[string]staticAsset{}}
	h := sha256.New()
	static, err := fs.ReadDir(files, "web/static")
	if err != nil {
		return nil, err
	}
	for _, e := range static {
		b, err := fs.ReadFile(files, "web/static/"+e.Name())
		if err != nil {
			return nil, err
		}
		ctype := mime.TypeByExtension(path.Ext(e.Name()))
		if path.Ext(e.Name()) == ".js" {
			ctype = "text/javascript; charset=utf-8"
		}
		ui.assets[e.Name()] = staticAsset{body: b, ctype: ctype}
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
		h.Write(b)
	}
	ui.version = hex.EncodeToString(h.Sum(nil))[:12]
	layout, err := template.New("layout.html").Funcs(template.FuncMap{"when": when, "shown": display.Shown, "urlPieces": urlPieces}).ParseFS(files, "web/templates/layout.html")
	if err != nil {
		return nil, err
	}
	pages, err := fs.Glob(files, "web/templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, p := range pages {
		name := strings.TrimSuffix(path.Base(p), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(files, p)
		if err != nil {
			return nil, err
		}
		ui.pages[name] = t
	}
	return ui, nil
}

// Routes registers the dashboard's pages, its assets and the sign-in
// link routes on m.
func (d *Dashboard) Routes(m web.Mux) {
	m.Handle("GET /{$}", http.HandlerFunc(d.dashboardHome))
	m.Handle("GET /login", http.HandlerFunc(d.publicPage("login", "Log in")))
	m.Handle("GET /signup", http.HandlerFunc(d.publicPage("signup", "Sign up")))
	m.Handle("GET /signin", http.HandlerFunc(d.publicPage("signin", "Signing in")))
	m.Handle("GET /claims", http.HandlerFunc(d.ownerPage("claims", "Claims", d.claimsView)))
	m.Handle("GET /services", http.HandlerFunc(d.ownerPage("services", "Services", d.servicesView)))
	m.Handle("GET /services/{id}", http.HandlerFunc(d.ownerPage("service", "Service", d.serviceView)))
	m.Handle("GET /account", http.HandlerFunc(d.ownerPage("account", "Account", d.accountView)))
	m.Handle("GET /did", http.HandlerFunc(d.ownerPage("did", "DID document", d.didView)))
	m.Handle("GET /assets/{version}/{file}", http.HandlerFunc(d.dashboardAsset))
	d.signinRoutes(m)
	d.gatewayPages(m)
	d.activityPages(m)
	d.actionPages(m)
}

// pageData is what every page template gets.
type pageData struct {
	Title     string
	Page      string // the template name, also the body's data-page
	Namespace string // the signed-in owner; empty on public pages
	Base      string // the path the control plane is mounted under
	Assets    string // URL prefix of the static files
	Passkeys  bool   // WebAuthn ceremonies are configured
	// InvitePasskey asks the signed-in owner, whose account has no
	// passkey, to add one: without it only a new sign-in link opens the
	// dashboard once the session ends.
	InvitePasskey bool
	View          any // the page's own data
}

// pageHeaders are the security headers of every dashboard answer.
func pageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// render writes page with status. The page is rendered into a buffer
// first, so a template failure never sends half a page.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, page, title, ns string, view any) {
	invite := false
	if ns != "" && page != "account" && d.accounts.Ceremonies() {
		has, err := d.accounts.HasPasskey(r.Context(), ns)
		invite = err == nil && !has // a failed read shows the page without the invitation
	}
	var buf bytes.Buffer
	err := dashboard.pages[page].ExecuteTemplate(&buf, "layout", pageData{
		Title: title, Page: page, Namespace: ns, Base: d.cfg.Base, Assets: d.cfg.Base + AssetsPath(),
		Passkeys: d.accounts.Ceremonies(), InvitePasskey: invite, View: view,
	})
	if err != nil {
		d.kit.Log.ErrorContext(r.Context(), "dashboard render failed", "page", page, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	pageHeaders(h)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// pageSession returns the owner of a live session cookie, or "".
func (d *Dashboard) pageSession(r *http.Request) string {
	token := d.sessions.Token(r)
	if token == "" {
		return ""
	}
	ns, err := d.sessions.Check(r.Context(), token)
	if err != nil {
		return ""
	}
	return ns
}

func (d *Dashboard) dashboardHome(w http.ResponseWriter, r *http.Request) {
	target := "/login"
	if d.pageSession(r) != "" {
		target = "/claims"
	}
	seeOther(w, d.cfg.Base+target)
}

// next is where to continue after signing in: the path next asks for when
// safeNext finds it safe, else the claims page, under the base path (a
// path already under it is kept as it is).
func (d *Dashboard) next(next string) string {
	if safeNext(next) != next {
		return d.cfg.Base + "/claims"
	}
	if d.cfg.Base != "" && !strings.HasPrefix(next, d.cfg.Base+"/") {
		return d.cfg.Base + next
	}
	return next
}

// seeOther redirects to target, a path of this server, with no body: the
// document promises a bare 303, and a browser shows none anyway.
func seeOther(w http.ResponseWriter, target string) {
	h := w.Header()
	pageHeaders(h)
	h.Set("Location", target)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusSeeOther)
}

// publicView is the data of a public page: where to continue after
// signing in, already checked by safeNext. The page's script goes there
// and checks nothing itself, so there is one check, here.
type publicView struct{ Next string }

// publicPage serves a page for visitors without a session; a signed-in
// owner is sent on to the claims (except from /signin, which may be
// switching accounts).
func (d *Dashboard) publicPage(page, title string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		next := d.next(r.URL.Query().Get("next"))
		if page != "signin" && d.pageSession(r) != "" {
			seeOther(w, next)
			return
		}
		d.render(w, r, http.StatusOK, page, title, "", publicView{Next: next})
	}
}

// safeNext is a same-origin path to continue to after logging in, else
// /claims: "/" not followed by "/", and printable ASCII other than "\"
// throughout. Browsers drop tabs and newlines anywhere in a URL, and
// leading spaces and controls, and read "\" as "/": to them "/\t/evil.example"
// is "//evil.example". With none of those bytes allowed, the URL a browser
// resolves is the one checked here.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") ||
		strings.ContainsFunc(next, func(c rune) bool { return c <= ' ' || c >= 0x7f || c == '\\' }) {
		return "/claims"
	}
	return next
}

// viewFunc builds the data of an owner page; an error is answered with
// an error page, and a redirect view sends the owner on.
type viewFunc func(r *http.Request, ns string) (any, error)

// redirect is a view that sends the owner to another path of the
// dashboard (under the base path) instead of rendering a page.
type redirect string

// errorView is what the error page shows: a heading naming what went
// wrong and a sentence on what to do.
type errorView struct{ Heading, Message string }

// ownerPage serves a page of the signed-in owner; without a live session
// it redirects to the login page, which comes back here afterwards.
func (d *Dashboard) ownerPage(page, title string, view viewFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ns := d.pageSession(r)
		if ns == "" {
			seeOther(w, d.cfg.Base+"/login?"+url.Values{"next": {d.cfg.Base + r.URL.RequestURI()}}.Encode())
			return
		}
		v, err := view(r, ns)
		if err != nil {
			status, ev := http.StatusInternalServerError, errorView{"Something went wrong", "The page could not be loaded. Try again in a moment."}
			switch {
			case errors.Is(err, claims.ErrServiceNotFound):
				status, ev = http.StatusNotFound, errorView{"No such service", "There is no service with this id or slug in your account."}
			case errors.Is(err, gatewaylink.ErrConnectFlowUnknown):
				status, ev = http.StatusBadRequest, errorView{"No connect flow in progress",
					"This answer of the provider belongs to no account you are connecting: it was used already, it expired, or it is not yours. Start again from the gateway's page."}
			case errors.Is(err, gatewaylink.ErrNotFound):
				status, ev = http.StatusNotFound, errorView{"No such gateway", "There is no such gateway in your account."}
			case errors.Is(err, sqldb.ErrUnavailable):
				status, ev = http.StatusServiceUnavailable, errorView{"Database unavailable", "The database is unavailable. Try again in a moment."}
			default:
				d.kit.Log.ErrorContext(r.Context(), "dashboard page failed", "page", page, "err", err)
			}
			d.render(w, r, status, "error", ev.Heading, ns, ev)
			return
		}
		if to, ok := v.(redirect); ok {
			seeOther(w, d.cfg.Base+string(to))
			return
		}
		d.render(w, r, http.StatusOK, page, title, ns, v)
	}
}

// dashboardAsset serves a static file. Under the current version it may
// be cached for good, since a change of content changes the URL.
func (d *Dashboard) dashboardAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := dashboard.assets[r.PathValue("file")]
	if !ok {
		apierror.Write(w, r, web.ErrNotFound)
		return
	}
	h := w.Header()
	pageHeaders(h)
	h.Set("Content-Type", a.ctype)
	if r.PathValue("version") == dashboard.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	w.Write(a.body)
}

// urlPieces cuts a URL after each slash that does not start "//", so
// "https://api.example.com/v1/x" is "https://", "api.example.com/",
// "v1/", "x". The pages show each piece unbroken with a line break
// allowed between them: an address wraps after a slash of its path, never
// inside its host or at a hyphen (display.js has the same function).
func urlPieces(u string) []string {
	var out []string
	for i := 0; i < len(u); i++ {
		if u[i] == '/' && (i+1 == len(u) || u[i+1] != '/') {
			out = append(out, u[:i+1])
			u, i = u[i+1:], -1
		}
	}
	if u != "" {
		out = append(out, u)
	}
	return out
}

// ago is a short human age of t at now.
func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " min ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + " h ago"
	default:
		return strconv.Itoa(int(d/(24*time.Hour))) + " days ago"
	}
}

// when is a timestamp as the pages show it (UTC, to the minute).
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// claimTab is one status tab of the claims page.
type claimTab struct {
	Status, Label, URL string
	Count              int64
	Current            bool
}

// claimRow is a claim as a row of the claims page shows it.
type claimRow struct {
	ID, Service, AgentName, AgentID, Subject, AgentIP, Status string
	PublicKey, Fingerprint                                    string
	Created, Age                                              string
	Label                                                     string // who the claim is for, in action names
	// Registry writes: the transactions, each linked to the block
	// explorer when one is configured, and why the last write failed.
	Transactions  []claimTx
	RegistryError string
}

// claimTx is one registry transaction of a claim.
type claimTx struct {
	Label, Hash, URL string
}

type claimsPage struct {
	Status, Service string
	Services        []string
	Tabs            []claimTab
	Rows            []claimRow
	Total           int64
	Pending         int64
	Shown           int // claims on this page
	PrevURL         string
	NextURL         string
	Query           string // the JSON API query of this view, for live updates
}

var claimTabs = []struct{ status, label string }{
	{claims.StatusPending, "Pending"}, {claims.StatusApproved, "Approved"}, {claims.StatusRevoked, "Revoked"},
	{claims.StatusRejected, "Rejected"}, {claims.StatusExpired, "Expired"},
}

// claimsURL is the claims page of status and service at a cursor of
// ownerClaims: cursor "after" or "before" with a claim id, or none.
func (d *Dashboard) claimsURL(status, service, cursor, id string) string {
	q := url.Values{"status": {status}}
	if service != "" {
		q.Set("service", service)
	}
	if cursor != "" {
		q.Set(cursor, id)
	}
	return d.cfg.Base + "/claims?" + q.Encode()
}

// claimsView is the claims page: one status at a time, newest first,
// optionally one service's, a page of PageSize. Its pager follows
// claim ids (after=, before=), so any page costs the same; an unknown one
// shows the first page.
func (d *Dashboard) claimsView(r *http.Request, ns string) (any, error) {
	q := r.URL.Query()
	v := claimsPage{Status: q.Get("status"), Service: q.Get("service")}
	if !claims.ValidStatus(v.Status) {
		v.Status = claims.StatusPending
	}
	if v.Service != "" && !claims.ValidSlug(v.Service) {
		v.Service = ""
	}
	cur := claims.Cursor{After: q.Get("after")}
	if cur.After == "" {
		cur.Before = q.Get("before")
	}
	ctx := r.Context()
	p, err := d.claims.OwnerClaims(ctx, ns, v.Status, v.Service, PageSize, cur)
	if err == claims.ErrClaimNotFound {
		cur = claims.Cursor{}
		p, err = d.claims.OwnerClaims(ctx, ns, v.Status, v.Service, PageSize, cur)
	}
	if err != nil {
		return nil, err
	}
	counts, err := d.claims.ClaimCounts(ctx, ns, v.Service)
	if err != nil {
		return nil, err
	}
	if v.Services, err = d.claims.ClaimServices(ctx, ns); err != nil {
		return nil, err
	}
	for _, t := range claimTabs {
		v.Tabs = append(v.Tabs, claimTab{Status: t.status, Label: t.label, Count: counts[t.status],
			URL: d.claimsURL(t.status, v.Service, "", ""), Current: t.status == v.Status})
	}
	v.Total, v.Pending, v.Shown = p.Total, counts[claims.StatusPending], len(p.Claims)
	before, after := claims.Neighbours(p)
	if before != "" {
		v.PrevURL = d.claimsURL(v.Status, v.Service, "before", before)
	}
	if after != "" {
		v.NextURL = d.claimsURL(v.Status, v.Service, "after", after)
	}
	api := url.Values{"status": {v.Status}, "limit": {strconv.Itoa(PageSize)}}
	if v.Service != "" {
		api.Set("service", v.Service)
	}
	switch {
	case p.HasNewer && cur.After != "":
		api.Set("after", cur.After)
	case p.HasNewer && cur.Before != "":
		api.Set("before", cur.Before)
	}
	v.Query = api.Encode()
	now := d.kit.Now()
	v.Rows = make([]claimRow, len(p.Claims))
	for i, c := range p.Claims {
		row := claimRow{ID: c.ID, Service: c.Service, AgentName: c.AgentName, AgentID: c.AgentID, Subject: c.Subject,
			AgentIP: c.AgentIP, Status: c.Status, PublicKey: c.PublicKey,
			Created: web.Timestamp(c.CreatedAt), Age: ago(now, c.CreatedAt)}
		if pub, err := identity.ParsePublicKey(c.PublicKey); err == nil {
			row.Fingerprint = identity.KeyFragment(pub)
		}
		row.Label = display.Shown(cmp.Or(c.AgentName, c.AgentID, row.Fingerprint)) + " on " + display.Shown(c.Service)
		row.RegistryError = c.RegistryError
		for _, tx := range []claimTx{{Label: "approval", Hash: c.ApprovalTxHash}, {Label: "revocation", Hash: c.RevocationTxHash}} {
			if tx.Hash == "" {
				continue
			}
			if base := d.cfg.ExplorerURL; base != "" {
				tx.URL = strings.TrimSuffix(base, "/") + "/tx/" + url.PathEscape(tx.Hash)
			}
			row.Transactions = append(row.Transactions, tx)
		}
		v.Rows[i] = row
	}
	return v, nil
}

type servicesPage struct {
	Services []claims.Service
}

func (d *Dashboard) servicesView(r *http.Request, ns string) (any, error) {
	list, err := d.claims.Services(r.Context(), ns)
	return servicesPage{Services: list}, err
}

// webhookView is a webhook with its recent deliveries.
type webhookView struct {
	webhooks.Webhook
	Deliveries []webhooks.Delivery
}

type servicePage struct {
	Service     claims.Service
	Keys        []claims.APIKey
	ActiveKeys  int
	MaxKeys     int
	Webhooks    []webhookView
	WebhooksOff bool
	Events      []string
}

// recentDeliveries is how many deliveries the service page lists per webhook.
const recentDeliveries = 10

func (d *Dashboard) serviceView(r *http.Request, ns string) (any, error) {
	ctx, id := r.Context(), r.PathValue("id")
	svc, err := d.claims.Service(ctx, ns, id)
	if errors.Is(err, claims.ErrServiceNotFound) && claims.ValidSlug(id) {
		// Owners know their services by slug: send one to its page.
		all, lerr := d.claims.Services(ctx, ns)
		if lerr != nil {
			return nil, lerr
		}
		for _, s := range all {
			if s.Slug == id {
				return redirect("/services/" + url.PathEscape(s.ID)), nil
			}
		}
	}
	if err != nil {
		return nil, err
	}
	v := servicePage{Service: svc, MaxKeys: d.cfg.MaxAPIKeys, Events: webhooks.Events(), WebhooksOff: !d.webhooks.On()}
	if v.Keys, err = d.claims.Keys(ctx, ns, id); err != nil {
		return nil, err
	}
	for _, k := range v.Keys {
		if k.RevokedAt == nil {
			v.ActiveKeys++
		}
	}
	if v.WebhooksOff {
		return v, nil
	}
	hooks, err := d.webhooks.List(ctx, ns, id)
	if err != nil {
		return nil, err
	}
	for _, wh := range hooks {
		d, err := d.webhooks.Deliveries(ctx, ns, id, wh.ID, recentDeliveries)
		if err != nil {
			return nil, err
		}
		v.Webhooks = append(v.Webhooks, webhookView{Webhook: wh, Deliveries: d})
	}
	return v, nil
}

type accountPage struct {
	Passkeys []passkeyRow
	Settings ownerauth.Settings
	Created  string
}

// passkeyRow is a passkey as the account page lists it.
type passkeyRow struct {
	ID, Name, Algorithm   string
	CreatedAt, LastUsedAt string
}

func (d *Dashboard) accountView(r *http.Request, ns string) (any, error) {
	acct, err := d.accounts.Account(r.Context(), ns)
	if err != nil {
		return nil, err
	}
	v := accountPage{Settings: acct.Settings, Created: when(acct.Created), Passkeys: make([]passkeyRow, len(acct.Passkeys))}
	for i, k := range acct.Passkeys {
		v.Passkeys[i] = passkeyRow{ID: k.ID, Name: k.Name, Algorithm: k.Algorithm, CreatedAt: when(k.CreatedAt), LastUsedAt: when(k.LastUsedAt)}
	}
	return v, nil
}

type didPage struct {
	DID, Document, ResolveURL string
	Keys, Services            int
	Owned                     int // the services the account owns, which the document does not list as such
}

// didView shows the namespace's public DID document, as resolvers get it.
func (d *Dashboard) didView(r *http.Request, ns string) (any, error) {
	doc, err := d.claims.DIDDocument(r, ns)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("controlplane: encode DID document: %w", err)
	}
	owned, err := d.claims.Services(r.Context(), ns)
	if err != nil {
		return nil, err
	}
	return didPage{DID: identity.DID(ns), Document: string(b), ResolveURL: d.cfg.Base + "/1.0/identifiers/" + identity.DID(ns),
		Keys: len(doc.VerificationMethod), Services: len(doc.Service), Owned: len(owned)}, nil
}
