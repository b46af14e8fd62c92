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
		b := &builder{service: "github"}
		handed := 0
		p, err := decodeFeedPage(strings.NewReader(body), func(c Claim) error {
			handed++
			if err := b.add(c); err != nil {
				t.Fatalf("builder refused a decoded claim: %v", err)
			}
			return nil
		})
		if err != nil {
			return
		}
		if p.total < 0 || p.claims != handed {
			t.Fatalf("page %+v after %d claims handed on", p, handed)
		}
		s := mustBuild(t, b)
		if s.claims+s.skipped > p.claims {
			t.Fatalf("%d claims + %d skipped from %d records", s.claims, s.skipped, p.claims)
		}
	})
}
