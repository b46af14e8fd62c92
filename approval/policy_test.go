package approval_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idnhq/idn/approval"
)

func TestPolicyHoldsSubjects(t *testing.T) {
	p := approval.NewPolicy(approval.Rules{Tools: []string{"delete_*"}, Routes: []string{"DELETE /repos/*"}}, map[string]approval.Rules{
		"alice":  {Tools: []string{"payments.*"}, Routes: []string{"POST /v1/payments"}},
		"Straße": {Tools: []string{"mail.send"}},
		"σοφία":  {Routes: []string{"POST /v1/mail"}},
	})
	rows := []struct {
		name, subject, tool, method, path string
		want                              bool
	}{
		{name: "subject's tool", subject: "alice", tool: "payments.send", want: true},
		{name: "subject's route", subject: "alice", method: "POST", path: "/v1/payments", want: true},
		{name: "another subject's tool is not held", subject: "bob", tool: "payments.send"},
		{name: "another subject's route is not held", subject: "bob", method: "POST", path: "/v1/payments"},
		{name: "connection's tool holds every subject", subject: "bob", tool: "delete_repo", want: true},
		{name: "connection's tool still holds a subject with rules", subject: "alice", tool: "delete_repo", want: true},
		{name: "connection's route still holds a subject with rules", subject: "alice", method: "DELETE", path: "/repos/x", want: true},
		{name: "attack: subject in upper case", subject: "ALICE", tool: "payments.send", want: true},
		{name: "attack: subject in mixed case", subject: "aLiCe", method: "post", path: "/v1/payments", want: true},
		{name: "attack: subject with spaces around", subject: " alice ", tool: "payments.send", want: true},
		{name: "attack: subject with a tab after", subject: "alice\t", method: "POST", path: "/v1/payments", want: true},
		{name: "attack: non-ASCII space before", subject: "\u00a0ALICE", tool: "payments.send", want: true},
		{name: "attack: subject's route with a trailing slash", subject: "alice", method: "POST", path: "/v1/payments/", want: true},
		{name: "attack: subject's route with an encoded letter", subject: "alice", method: "POST", path: "/v1/p%61yments", want: true},
		{name: "attack: unreadable escape", subject: "bob", method: "GET", path: "/x%zz", want: true},
		{name: "a full case mapping is another subject", subject: "STRASSE", tool: "mail.send"},
		{name: "attack: non-ASCII subject's case", subject: "straße", tool: "mail.send", want: true},
		{name: "attack: final sigma", subject: "ΣΟΦΊΑ", method: "POST", path: "/v1/mail", want: true},
		{name: "attack: no subject is held by every subject's tools", tool: "mail.send", want: true},
		{name: "attack: no subject is held by every subject's routes", method: "POST", path: "/v1/payments", want: true},
		{name: "no subject, no rule", tool: "read"},
		{name: "unrelated", subject: "alice", tool: "read"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			var got bool
			if row.tool != "" {
				got = p.HoldsTool(row.subject, row.tool)
			} else {
				got = p.HoldsRoute(row.subject, row.method, row.path)
			}
			if got != row.want {
				t.Fatalf("held = %v, want %v", got, row.want)
			}
		})
	}
}

func TestPolicyJoinsSubjectsThatFoldTogether(t *testing.T) {
	// A store written before the check may hold both; neither may be lost.
	p := approval.NewPolicy(approval.Rules{}, map[string]approval.Rules{"alice": {Tools: []string{"a"}}, "Alice": {Tools: []string{"b"}}})
	if !p.HoldsTool("alice", "a") || !p.HoldsTool("ALICE", "b") {
		t.Fatal("a subject's rules were lost to another spelling of it")
	}
	if !approval.NewPolicy(approval.Rules{}, nil).Empty() || p.Empty() {
		t.Fatal("Empty is wrong")
	}
}

func TestCheckSubjects(t *testing.T) {
	tooMany := map[string]approval.Rules{}
	for i := range approval.MaxSubjects + 1 {
		tooMany[fmt.Sprint("s", i)] = approval.Rules{Tools: []string{"x"}}
	}
	rows := []struct {
		name     string
		subjects map[string]approval.Rules
		want     string
	}{
		{"empty subject", map[string]approval.Rules{"": {Tools: []string{"x"}}}, "must be 1-256 bytes"},
		{"space before", map[string]approval.Rules{" alice": {Tools: []string{"x"}}}, "without spaces"},
		{"too long", map[string]approval.Rules{strings.Repeat("a", 257): {Tools: []string{"x"}}}, "must be 1-256 bytes"},
		{"attack: right-to-left override", map[string]approval.Rules{"ali\u202ece": {Tools: []string{"x"}}}, "invisible or control"},
		{"attack: two spellings of one subject", map[string]approval.Rules{"alice": {Tools: []string{"x"}}, "ALICE": {Tools: []string{"y"}}}, `"ALICE" and "alice" are the same subject`},
		{"no rule", map[string]approval.Rules{"alice": {}}, "has no rule"},
		{"bad route", map[string]approval.Rules{"alice": {Routes: []string{"POST pay"}}}, `subject "alice": route "POST pay" must be`},
		{"too many", tooMany, "more than 1000 subjects"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			err := approval.CheckSubjects(row.subjects)
			if err == nil || !strings.Contains(err.Error(), row.want) {
				t.Fatalf("CheckSubjects = %v, want %q", err, row.want)
			}
		})
	}
	if err := approval.CheckSubjects(map[string]approval.Rules{"alice": {Tools: []string{"pay*"}}, "Bob Smith": {Routes: []string{"POST /x"}}}); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkHoldsRouteMissSubjects is BenchmarkMatchRouteMiss on a
// connection that also has rules for 100 other subjects, the caller's
// subject spelt in mixed case: what subject rules cost a call they do not
// hold.
func BenchmarkHoldsRouteMissSubjects(b *testing.B) {
	subjects := map[string]approval.Rules{}
	for i := range 100 {
		subjects[fmt.Sprint("user-", i)] = approval.Rules{Routes: []string{"POST /v1/payments"}}
	}
	p := approval.NewPolicy(approval.Rules{Routes: []string{"POST /v1/payments", "DELETE /v1/repos/*", "* /admin/*"}}, subjects)
	b.ReportAllocs()
	for b.Loop() {
		if p.HoldsRoute("Mallory", "GET", "/v1/repos/acme/site/issues") {
			b.Fatal("held")
		}
	}
}
