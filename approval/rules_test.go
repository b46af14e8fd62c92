package approval_test

import (
	"testing"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/approval/approvaltest"
)

func TestMatchRoute(t *testing.T) {
	r := approval.Rules{Routes: []string{"POST /v1/payments", "DELETE /v1/repos/*", "* /admin/*"}}
	rows := []struct {
		name, method, path string
		want               bool
	}{
		{"exact", "POST", "/v1/payments", true},
		{"other method", "GET", "/v1/payments", false},
		{"lower-case method", "post", "/v1/payments", true},
		{"attack: trailing slash", "POST", "/v1/payments/", true},
		{"attack: doubled slash", "POST", "/v1//payments", true},
		{"attack: encoded letter", "POST", "/v1/p%61yments", true},
		{"attack: encoded slash", "POST", "/v1%2Fpayments", true},
		{"attack: unreadable escape", "POST", "/v1/pay%zz", true},
		{"glob", "DELETE", "/v1/repos/acme/site", true},
		{"glob base", "DELETE", "/v1/repos", false},
		{"any method", "PATCH", "/admin/users", true},
		{"unrelated", "POST", "/v1/quotes", false},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			if got := r.MatchRoute(row.method, row.path); got != row.want {
				t.Fatalf("MatchRoute(%s %s) = %v", row.method, row.path, got)
			}
		})
	}
	if (approval.Rules{}).MatchRoute("POST", "/v1/payments") {
		t.Fatal("empty rules matched")
	}
}

func TestMatchTool(t *testing.T) {
	r := approval.Rules{Tools: []string{"payments.*", "delete_?"}}
	for name, want := range map[string]bool{"payments.send": true, "delete_x": true, "delete_xy": false, "read": false} {
		if r.MatchTool(name) != want {
			t.Errorf("MatchTool(%q) = %v", name, !want)
		}
	}
}

func TestRulesCheck(t *testing.T) {
	for _, bad := range []approval.Rules{
		{Routes: []string{"POST"}},
		{Routes: []string{"POST v1/payments"}},
		{Routes: []string{"PO ST /x"}},
		{Routes: []string{"P(ST /x"}},
		{Tools: []string{""}},
		{Tools: []string{"a\nb"}},
	} {
		if bad.Check() == nil {
			t.Errorf("%+v passed Check", bad)
		}
	}
	if err := (approval.Rules{Tools: []string{"pay*"}, Routes: []string{"* /x/*", "post /pay"}}).Check(); err != nil {
		t.Fatal(err)
	}
}

func FuzzCanonical(f *testing.F) {
	f.Add([]byte(`{"b":1,"a":[{"c":null}]}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`[{"x":{"y":1,"y":2}}]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := approval.Canonical(raw)
		if err != nil {
			return
		}
		again, err := approval.Canonical(c)
		if err != nil || string(again) != string(c) {
			t.Fatalf("canonical form %s is not stable: %s, %v", c, again, err)
		}
	})
}

// FuzzVerify: no assertion, however malformed, passes or panics.
func FuzzVerify(f *testing.F) {
	owner := approvaltest.NewPasskey("idn.example", "https://idn.example")
	keys := approvaltest.Keys("acme", owner)
	good := owner.Assert([]byte("challenge"), approvaltest.Flags)
	f.Add(good.AuthenticatorData, good.ClientDataJSON, good.Signature)
	f.Add([]byte{}, []byte(`{"type":"webauthn.get"}`), []byte{0x30})
	f.Fuzz(func(t *testing.T, authData, clientData, sig []byte) {
		a := &approval.Assertion{CredentialID: owner.ID, AuthenticatorData: authData, ClientDataJSON: clientData, Signature: sig}
		if keys.Verify(a, []byte("another challenge")) == nil {
			t.Fatal("an assertion over another challenge verified")
		}
	})
}

// BenchmarkMatchRouteMiss is what a connection's rules cost a call they
// do not hold: the whole of the gateway's extra work for it.
func BenchmarkMatchRouteMiss(b *testing.B) {
	r := approval.Rules{Routes: []string{"POST /v1/payments", "DELETE /v1/repos/*", "* /admin/*"}}
	b.ReportAllocs()
	for b.Loop() {
		if r.MatchRoute("GET", "/v1/repos/acme/site/issues") {
			b.Fatal("matched")
		}
	}
}
