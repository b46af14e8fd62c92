package proxy

import (
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/idnhq/idn/errcode"
)

// escapes are rest paths that climb out of a connection's base path once
// an upstream decodes them, in every spelling that reached one.
var escapes = []string{
	"/..%2fsecret.txt",
	"/..%2Fsecret.txt",
	"/%2e%2e%2fsecret.txt",
	"/%2E%2E/secret.txt",
	"/.%2e%2fsecret.txt",
	"/%2e./secret.txt",
	"/..%5csecret.txt",
	"/..%5Csecret.txt",
	"/a/%2e%2e%2f%2e%2e%2fsecret.txt",
	"/..;/secret.txt",
	"/%2e%2e;x/secret.txt",
	"/./secret.txt",
	"/%2e/secret.txt",
	"/a%5c..%5c..%5csecret.txt",
	"/..",
	"/%2e%2e",
	"/x/%2e%2e%2f",
}

// Every escape is refused 400 before the request is authenticated or
// forwarded, on /proxy routes and on alias routes alike; ordinary paths,
// including encoded slashes, go upstream exactly as sent.
func TestPathPrefixEscape(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	for _, rest := range escapes {
		for _, route := range []string{"/proxy/keyed", "/proxy/github", "/gh"} {
			t.Run(route+rest, func(t *testing.T) {
				a := g.do(g.request(g.agent, "GET", route+rest, ""))
				if a.status != 400 || a.env["code"] != errcode.ValidationError.String() {
					t.Fatalf("got %d %v, want 400 %s", a.status, a.env["code"], errcode.ValidationError.String())
				}
				if s := g.up.lastSeen(); strings.Contains(s.Path, "secret") {
					t.Fatalf("upstream saw %s", s.Path)
				}
			})
		}
	}
	t.Run("unauthenticated escape is refused the same way", func(t *testing.T) {
		r, _ := http.NewRequest("GET", g.srv.URL+"/proxy/keyed/..%2fsecret.txt", nil)
		if a := g.do(r); a.status != 400 || a.env["code"] != errcode.ValidationError.String() {
			t.Fatalf("got %d %v", a.status, a.env["code"])
		}
	})
	for _, tc := range []struct{ route, upstream string }{
		{"/proxy/keyed/files/a%2Fb.txt", "/v2/files/a%2Fb.txt"},
		{"/proxy/keyed/...", "/v2/..."},
		{"/proxy/keyed/.well-known/x", "/v2/.well-known/x"},
		{"/proxy/keyed/%252e%252e%252fsecret", "/v2/%252e%252e%252fsecret"},
		{"/gh/repos/a%2Fb", "/api/repos/a%2Fb"},
	} {
		t.Run("forwarded "+tc.route, func(t *testing.T) {
			if a := g.do(g.request(g.agent, "GET", tc.route, "")); a.status != 200 {
				t.Fatalf("got %d %s", a.status, a.body)
			}
			if s := g.up.lastSeen(); s.Path != tc.upstream {
				t.Fatalf("upstream saw %s, want %s", s.Path, tc.upstream)
			}
		})
	}
}

// FuzzForwardedPath checks, for any request path on a /proxy route and an
// alias route, that what the gateway would forward stays under the
// connection's base path and prefix however the upstream reads it:
// decoded, cleaned, and with backslashes taken for slashes. The path goes
// upstream as sent, never re-encoded.
func FuzzForwardedPath(f *testing.F) {
	for _, s := range escapes {
		f.Add(strings.TrimPrefix(s, "/"))
	}
	for _, s := range []string{"", "a", "a/b", "a%2Fb", "...", ".well-known", "%252e%252e%252f", "a//b", "%", "%zz",
		"a/%00/b", "..%00/x", "%2e%2e%00"} {
		f.Add(s)
	}
	base, _ := url.Parse("http://upstream.example/api/v2")
	const under = "/api/v2"
	h := &Handler{cfg: Config{Options: Options{Aliases: map[string]string{"files": "files"}}}}
	f.Fuzz(func(t *testing.T, rest string) {
		for _, prefix := range []string{"/proxy/files/", "/files/"} {
			u, err := url.ParseRequestURI(prefix + rest)
			if err != nil {
				continue
			}
			rt, ok := h.parseRoute(&http.Request{URL: u})
			if !ok || rt.connID != "files" || !validRest(rt.rest) {
				continue
			}
			out, err := joinUpstream(base, rt.rest, "")
			if err != nil {
				t.Fatalf("%q passed validRest but not joinUpstream: %v", rt.rest, err)
			}
			if got := out.EscapedPath(); got != under+rt.rest && !(rt.rest == "" && got == under) {
				t.Fatalf("%q forwarded as %q, want %q", prefix+rest, got, under+rt.rest)
			}
			for _, seen := range []string{out.Path, strings.ReplaceAll(out.Path, `\`, "/")} {
				if c := path.Clean(seen); c != under && !strings.HasPrefix(c, under+"/") {
					t.Fatalf("%q reaches %q upstream (decoded %q), outside %s", prefix+rest, c, seen, under)
				}
			}
		}
	})
}
