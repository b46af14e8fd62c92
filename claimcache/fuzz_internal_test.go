package claimcache

import (
	"strings"
	"testing"
)

// FuzzDecodeFeedPage checks that no feed page, however malformed, panics the
// decoder or yields a page that breaks its own invariants, and that the
// builder accepts whatever the decoder returns.
func FuzzDecodeFeedPage(f *testing.F) {
	for _, seed := range []string{
		`{"claims":[],"pagination":{"limit":2000,"offset":0,"total":0,"has_more":false}}`,
		`{"claims":[{"claim_id":"clm_1","namespace":"alice","public_key":"ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=","service":"github","approved_at":"2026-01-02T03:04:05Z"}],"pagination":{"limit":1,"offset":0,"total":2,"has_more":true}}`,
		`{"claims":[{"claim_id":"clm_1","namespace":"alice","public_key":"ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo","service":"github","approved_at":"2026-01-02T03:04:05.123+02:00","subject":"s","agent_id":"a","agent_name":"n","extra":1}],"pagination":{"limit":5,"offset":7,"total":8,"has_more":false}}`,
		`{"claims":null,"pagination":{"limit":1,"offset":0,"total":0,"has_more":false}}`,
		`{"claims":[{"approved_at":"yesterday"}],"pagination":{"limit":1,"offset":0,"total":1,"has_more":false}}`,
		`{"claims":[],"pagination":{"limit":-1,"offset":0,"total":0,"has_more":false}}`,
		`{"claims":[],"pagination":{"limit":1e400,"offset":0,"total":0,"has_more":false}}`,
		`[]`, `null`, `{}`, ``, `{"claims":[`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		p, err := decodeFeedPage(strings.NewReader(body))
		if err != nil {
			return
		}
		if p.total < 0 {
			t.Fatalf("negative total %d accepted", p.total)
		}
		b := &builder{service: "github"}
		for _, c := range p.claims {
			if err := b.add(c); err != nil {
				t.Fatalf("builder refused a decoded claim: %v", err)
			}
		}
		s := mustBuild(t, b)
		if s.claims+s.skipped > len(p.claims) {
			t.Fatalf("%d claims + %d skipped from %d records", s.claims, s.skipped, len(p.claims))
		}
	})
}

// FuzzDecodeChanges checks that no answer for changes, however malformed,
// panics the decoder or yields a page that breaks its invariants (the
// cursor moves forward with the changes only), and that a view accepts
// whatever it returns.
func FuzzDecodeChanges(f *testing.F) {
	for _, seed := range []string{
		`{"changes":[],"cursor":"5","more":false}`,
		`{"changes":[{"op":"upsert","claim_id":"clm_1","namespace":"alice","public_key":"ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=","service":"github","approved_at":"2026-01-02T03:04:05Z"},{"op":"delete","claim_id":"clm_1","namespace":"alice","public_key":"ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=","service":"github"}],"cursor":"7","more":true}`,
		`{"changes":[{"op":"grant"}],"cursor":"6","more":false}`,
		`{"changes":[],"cursor":"05","more":false}`,
		`{"changes":null,"cursor":"5","more":false}`,
		`[]`, `null`, `{}`, ``,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		p, err := decodeChanges(strings.NewReader(body), 5, 10)
		if err != nil {
			return
		}
		if len(p.changes) > 10 || len(p.changes) == 0 && (p.cursor != 5 || p.more) || len(p.changes) > 0 && p.cursor <= 5 {
			t.Fatalf("page breaks its invariants: %d changes, cursor %d, more %v", len(p.changes), p.cursor, p.more)
		}
		e := newView(mustBuild(t, &builder{service: "github"})).edit("github")
		for _, ch := range p.changes {
			if err := e.apply(ch); err != nil {
				t.Fatalf("view refused a decoded change: %v", err)
			}
		}
		if v, err := e.done("x"); err != nil || v.claims < 0 {
			t.Fatalf("view after changes: %+v, %v", v, err)
		}
	})
}
