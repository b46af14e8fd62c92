package credvault

import (
	"context"
	"slices"
	"testing"
)

func TestRedactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := newTestVault(t)
	if _, _, err := v.PutVariable(ctx, "PASS", "p@ss/w0rd+long", ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.PutVariable(ctx, "ORG", "acme", ""); err != nil {
		t.Fatal(err)
	}
	create := func(c *Connection, secret string) *Resolved {
		t.Helper()
		if _, err := v.Create(ctx, c, map[string]string{"token": secret}); err != nil {
			t.Fatal(err)
		}
		r, _ := v.Lookup(c.ID)
		return r
	}
	cases := []struct {
		name string
		res  *Resolved
		want []string
		not  []string
	}{
		{
			name: "bearer_alphanumeric_secret_and_its_header_value",
			res:  create(httpConn("plain"), "sk_live_abc123"),
			want: []string{"Bearer sk_live_abc123", "sk_live_abc123"},
		},
		{
			name: "query_param_secret_in_every_escaping",
			res: create(&Connection{ID: "q", BaseURL: "https://x.test", AuthMode: AuthQueryParam, AuthSecretKey: "token"},
				`a/b+c="d"`),
			want: []string{`a/b+c="d"`, "a%2Fb%2Bc%3D%22d%22", "a%2fb%2bc%3d%22d%22", "a%2Fb+c=%22d%22", "a%2fb+c=%22d%22",
				`a/b+c=\"d\"`, `a\/b+c=\"d\"`},
			not: []string{"Bearer " + `a/b+c="d"`},
		},
		{
			name: "go_json_escapes_html",
			res:  create(httpConn("html"), "tok<&>en"),
			want: []string{`tok\u003c\u0026\u003een`},
		},
		{
			name: "template_lists_the_resolved_value_and_long_variable_values_only",
			res:  create(httpConn("tpl"), "{{ORG}}:{{PASS}}"),
			want: []string{"acme:p@ss/w0rd+long", "p@ss/w0rd+long", "p%40ss%2Fw0rd%2Blong"},
			not:  []string{"acme"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.res.Redactions()
			for _, w := range c.want {
				if !slices.Contains(got, w) {
					t.Errorf("Redactions() = %q, missing %q", got, w)
				}
			}
			for _, n := range c.not {
				if slices.Contains(got, n) {
					t.Errorf("Redactions() lists %q", n)
				}
			}
			for i := 1; i < len(got); i++ {
				if len(got[i]) > len(got[i-1]) || got[i] == got[i-1] {
					t.Errorf("Redactions() not longest first without duplicates: %q", got)
				}
			}
		})
	}
	unresolved := create(httpConn("missing"), "{{NOPE}}")
	if got := unresolved.Redactions(); len(got) != 0 {
		t.Errorf("unresolved credential lists %q", got)
	}
}

func TestAllowUpstreamCookiesIsStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &MemoryStore{}
	v := openTestVault(t, st, testKey(t), -1)
	c := httpConn("cookies")
	c.AllowUpstreamCookies = true
	if _, err := v.Create(ctx, c, map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	again := openTestVault(t, st, testKey(t), -1)
	got, err := again.Connection("cookies")
	if err != nil || !got.AllowUpstreamCookies {
		t.Fatalf("reopened connection = %+v, %v; want allow_upstream_cookies kept", got, err)
	}
	if _, err := again.Update(ctx, "cookies", func(c *Connection) error { c.AllowUpstreamCookies = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := again.Connection("cookies"); got.AllowUpstreamCookies {
		t.Fatal("update did not clear allow_upstream_cookies")
	}
}
