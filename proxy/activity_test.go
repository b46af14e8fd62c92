package proxy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
)

// recorded collects the handler's activity.
type recorded struct {
	mu   sync.Mutex
	list []Activity
}

func (r *recorded) RecordActivity(a Activity) {
	r.mu.Lock()
	r.list = append(r.list, a)
	r.mu.Unlock()
}

func (r *recorded) take() []Activity {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.list
	r.list = nil
	return out
}

func TestActivity(t *testing.T) {
	rec := &recorded{}
	g := newGateway(t, gatewayOptions{activity: rec})
	for _, c := range []struct {
		name, method, path string
		by                 string // "agent", "stranger"
		want               Activity
	}{
		{"allowed", "GET", "/proxy/github/repos/octo/7f3a9c1e2b4d/issues/42?state=open&token=" + querySecret, "agent",
			Activity{Connection: "github", Service: "github", Method: "GET", Route: "/repos/octo/{id}/issues/{id}", Allowed: true, Status: 200}},
		{"through an alias", "POST", "/gh/v2/chat.postMessage", "agent",
			Activity{Connection: "github", Service: "github", Method: "POST", Route: "/v2/chat.postMessage", Allowed: true, Status: 200}},
		{"refused: no claim", "GET", "/proxy/github/user", "stranger",
			Activity{Connection: "github", Service: "github", Method: "GET", Route: "/user", Reason: "AUTH_CLAIM_REQUIRED", Status: 403}},
		{"refused: unknown connection", "DELETE", "/proxy/nope/x", "agent",
			Activity{Connection: "nope", Method: "DELETE", Route: "/x", Reason: "CONNECTION_NOT_FOUND", Status: 404}},
		{"upstream unreachable", "GET", "/proxy/dead/x", "agent",
			Activity{Connection: "dead", Service: "github", Method: "GET", Route: "/x", Allowed: true, Reason: "UPSTREAM_ERROR", Status: 502}},
		{"attack: unsigned request naming a connection of its own", "GET", "/proxy/chosen-by-sender/confirm/XkQzVbNm", "nobody",
			Activity{Method: "GET", Reason: "AUTH_HEADERS_INVALID", Status: 403}},
		{"attack: unsigned request to a real connection", "GET", "/proxy/github/user", "nobody",
			Activity{Method: "GET", Reason: "AUTH_HEADERS_INVALID", Status: 403}},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := g.agent
			if c.by == "stranger" {
				id = g.stranger
			}
			req := g.request(id, c.method, c.path, "")
			if c.by == "nobody" {
				req.Header.Del("Signature")
				req.Header.Del("Signature-Input")
			}
			g.do(req)
			got := rec.take()
			if len(got) != 1 {
				t.Fatalf("%d records, want 1: %+v", len(got), got)
			}
			a := got[0]
			if a.AgentKey != id.PublicKeyString() && c.by == "agent" || c.by == "nobody" && a.AgentKey != "" {
				t.Errorf("agent key %q, want the caller's", a.AgentKey)
			}
			if a.At.IsZero() || a.Latency <= 0 {
				t.Errorf("record has no time or latency: %+v", a)
			}
			a.At, a.Latency, a.AgentKey, a.AgentName = c.want.At, 0, "", ""
			if a != c.want {
				t.Errorf("record\n got %+v\nwant %+v", a, c.want)
			}
			for _, secret := range []string{querySecret, upstreamToken, "state=open", "?"} {
				if strings.Contains(a.Route, secret) {
					t.Errorf("route %q carries %q", a.Route, secret)
				}
			}
		})
	}
}

func TestRouteTemplate(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"root", "", "/"},
		{"slash", "/", "/"},
		{"words", "/repos/octo/issues", "/repos/octo/issues"},
		{"a REST listing", "/v1/repos", "/v1/repos"},
		{"one word", "/user", "/user"},
		{"nested words", "/search/issues", "/search/issues"},
		{"versions", "/v1/models/V2.1/x", "/v1/models/V2.1/x"},
		{"dotted method", "/api/chat.postMessage", "/api/chat.postMessage"},
		{"capitalized provider", "/providers/Microsoft.Compute/virtualMachines", "/providers/Microsoft.Compute/virtualMachines"},
		{"joined words", "/pull_requests/check-runs", "/pull_requests/check-runs"},
		{"trailing slash", "/users/", "/users/"},
		{"numbers", "/issues/42", "/issues/{id}"},
		{"attack: uuid", "/runs/123e4567-e89b-12d3-a456-426614174000/log", "/runs/{id}/log"},
		{"attack: random token of capitals and letters", "/confirm/XkQzVbNmLpRtWsYh", "/confirm/{id}"},
		{"attack: mixed-case base62 led by a lowercase letter", "/share/kQzVbNmLpRtWsYhA", "/share/{id}"},
		{"attack: mixed-case base62 with digits", "/invite/aZ3kP9qLm2XvB7nT", "/invite/{id}"},
		{"attack: random lowercase token", "/reset/xkqzvbnmlprtwsyh", "/reset/{id}"},
		{"attack: key-prefixed secret", "/v1/sessions/Sk-live-AbCdEfGhIjKlMnOp", "/v1/sessions/{id}"},
		{"attack: key-prefixed secret in lowercase", "/keys/sk-live-abcdefghijab", "/keys/{id}"},
		{"attack: key-prefixed webhook secret", "/hooks/whsec_mysecretvalue", "/hooks/{id}"},
		{"attack: token in the path", "/hooks/xoxb-1234-abcd", "/hooks/{id}"},
		{"attack: long hex", "/commits/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "/commits/{id}"},
		{"attack: hex hash spelled in letters", "/blobs/deadbeefcafe", "/blobs/{id}"},
		{"attack: dashed hex spelled in letters", "/blobs/deadbeef-cafe-face", "/blobs/{id}"},
		{"attack: e-mail address", "/users/bob@example.com", "/users/{id}"},
		{"attack: escaped secret", "/q/a%20b", "/q/{id}"},
		{"attack: JWT", "/verify/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "/verify/{id}"},
		{"attack: long word", "/" + strings.Repeat("a", 41), "/{id}"},
		{"attack: long run of one letter", "/" + strings.Repeat("z", 12), "/{id}"},
		{"attack: endless path", strings.Repeat("/a", 40), strings.Repeat("/a", 16) + "/…"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := RouteTemplate(c.in); got != c.want {
				t.Errorf("RouteTemplate(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

// FuzzRouteTemplate: whatever the path, the template keeps no segment
// with a digit (other than a version), an escape or an '@', stays within
// its bounds and is what the control plane stores (no query, no control
// character).
func FuzzRouteTemplate(f *testing.F) {
	for _, s := range []string{"", "/", "/v1/repos", "/confirm/XkQzVbNmLpRtWsYh", "/a%2Fb/c@d", "/chat.postMessage",
		"/Sk-live-AbCd", strings.Repeat("/word", 20), "/x?y=1", "/\x00\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rest string) {
		got := RouteTemplate(rest)
		if !strings.HasPrefix(got, "/") || len(got) > maxRouteSegments*(maxWordSegment+1)+len("/…") {
			t.Fatalf("RouteTemplate(%q) = %q: out of bounds", rest, got)
		}
		for _, seg := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(got, "/"), "/…"), "/") {
			if seg == "" || seg == idPlaceholder || versionSegment(seg) {
				continue
			}
			if strings.ContainsFunc(seg, func(r rune) bool { return !(r < utf8.RuneSelf && isLetter(byte(r))) && !strings.ContainsRune("-_.", r) }) {
				t.Fatalf("RouteTemplate(%q) keeps %q", rest, seg)
			}
			if !strings.Contains(rest, seg) {
				t.Fatalf("RouteTemplate(%q) invents %q", rest, seg)
			}
		}
	})
}

// TestActivityNamesTheOAuthAccount: a call on an oauth2_authorization_code
// connection names the account that served it or would have (its
// subject), and says when it was refused because that account needs
// reconnecting; never a token.
func TestActivityNamesTheOAuthAccount(t *testing.T) {
	rec := &recorded{}
	g := newGateway(t, gatewayOptions{activity: rec})
	// The provider refuses bob's refresh token, and is down for dave.
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.FormValue("refresh_token") {
		case "refresh-token-of-bob":
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":"invalid_grant"}`))
		case "refresh-token-of-alice":
			w.Write([]byte(`{"access_token":"access-token-of-alice","token_type":"Bearer","expires_in":3600}`))
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(provider.Close)
	ctx := context.Background()
	if _, err := g.vault.Create(ctx, &credvault.Connection{ID: "drive", Service: "github", BaseURL: g.up.srv.URL,
		AuthMode: credvault.AuthOAuth2AuthorizationCode, OAuthAuthURL: provider.URL + "/authorize",
		OAuthTokenURL: provider.URL + "/token", OAuthClientID: "gateway", OAuthPerSubject: true}, nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"alice", "bob", "dave"} {
		if err := g.vault.ConnectAccount(ctx, "drive", s, "refresh-token-of-"+s); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		subject, reason string
		allowed, needs  bool
	}{
		{subject: "alice", allowed: true},
		{subject: "bob", reason: "UPSTREAM_AUTH_REQUIRED", needs: true},
		{subject: "bob", reason: "UPSTREAM_AUTH_REQUIRED", needs: true}, // marked: no refresh tried
		{subject: "carol", reason: "UPSTREAM_AUTH_REQUIRED"},            // no account at all
		{subject: "dave", reason: "UPSTREAM_AUTH_UNAVAILABLE"},
	} {
		r, _ := http.NewRequest("GET", g.srv.URL+"/proxy/drive/files", nil)
		if err := g.agent.Sign(r, identity.SignOptions{Created: g.clock.now(), Subject: c.subject}); err != nil {
			t.Fatal(err)
		}
		g.do(r)
		got := rec.take()
		if len(got) != 1 || !got[0].OAuthAccount || got[0].Account != c.subject || got[0].Reason != c.reason ||
			got[0].Allowed != c.allowed || got[0].AccountNeedsReconnecting != c.needs {
			t.Fatalf("%s's call recorded %+v", c.subject, got)
		}
		if strings.Contains(fmt.Sprintf("%+v", got[0]), "-token-of-") {
			t.Fatal("the record carries a token")
		}
	}
	// A static connection's call names no account.
	g.do(g.request(g.agent, "GET", "/proxy/github/user", ""))
	if got := rec.take(); len(got) != 1 || got[0].OAuthAccount || got[0].Account != "" {
		t.Fatalf("a static connection's record %+v", got)
	}
}
