package claimcache

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/idnhq/idn/claimcache/feedwire"
	"github.com/idnhq/idn/internal/heldmem"
)

// FuzzDecodeFeedPage checks that no feed page, however malformed, panics the
// decoder or yields a page that breaks its own invariants, that the builder
// accepts whatever the decoder returns, that a page reads the same however
// its bytes arrive, and that a page the decoder accepts reads the same
// through encoding/json.
func FuzzDecodeFeedPage(f *testing.F) {
	for _, seed := range []string{
		`{"claims":[],"pagination":{"limit":2000,"offset":0,"total":0,"has_more":false}}`,
		`{"claims":[{"claim_id":"clm_1","namespace":"alice","public_key":"ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=","service":"github","approved_at":"2026-01-02T03:04:05Z"}],"pagination":{"limit":1,"offset":0,"total":2,"has_more":true}}`,
		`{"claims":[{"claim_id":"clm_1","namespace":"alice","public_key":"ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo","service":"github","approved_at":"2026-01-02T03:04:05.123+02:00","subject":"s","agent_id":"a","agent_name":"n","extra":1}],"pagination":{"limit":5,"offset":7,"total":8,"has_more":false}}`,
		" { \"pagination\" : { \"has_more\" : true , \"total\" : 3 , \"offset\" : 0 , \"limit\" : 2 , \"x\" : [ 1.5e3 , { } , [ ] , null ] } ,\n" +
			"\"claims\" : [ { \"claim_id\" : \"clm_\\u00e9\\n\\\"\" , \"namespace\" : \"caf\u00e9\" , \"agent_name\" : \"\\ud83d\\ude00 \\ud800 \\udc00x\" , \"subject\" : null , \"n\" : { \"deep\" : [ \"\\/\" ] } } , null ] } \t",
		"{\"claims\":[{\"agent_name\":\"a\xffb\\ud800\\u0041\"}],\"pagination\":{\"limit\":1,\"offset\":0,\"total\":1,\"has_more\":false}}",
		`{"claims":null,"pagination":{"limit":1,"offset":0,"total":0,"has_more":false}}`,
		`{"claims":[{"approved_at":"yesterday"}],"pagination":{"limit":1,"offset":0,"total":1,"has_more":false}}`,
		`{"claims":[{"namespace":5}],"pagination":{"limit":1,"offset":0,"total":1,"has_more":false}}`,
		`{"claims":[],"pagination":{"limit":-1,"offset":0,"total":0,"has_more":false}}`,
		`{"claims":[],"pagination":{"limit":1e400,"offset":0,"total":0,"has_more":false}}`,
		`{"claims":[],"pagination":{"limit":1.0,"offset":0,"total":0,"has_more":false}}`,
		`{"claims":[],"pagination":{"limit":01,"offset":0,"total":0,"has_more":false}}`,
		`{"claims":[],"pagination":{"limit":1,"offset":0,"total":0,"has_more":false}} {}`,
		`{"claims":[],"pagination":{"limit":1,"offset":0,"total":0,"has_more":false}}` + "\x00",
		`{"claims":[],"claims":[],"pagination":{"limit":1,"offset":0,"total":0,"has_more":false}}`,
		`{"claims":[1],"pagination":{"limit":1,"offset":0,"total":0,"has_more":false}}`,
		`{"claims":[{"namespace":"a\u00"}],"pagination":{"limit":1,"offset":0,"total":0,"has_more":false}}`,
		`{"claims":[{"namespace":"a` + "\x01" + `"}],"pagination":{"limit":1,"offset":0,"total":0,"has_more":false}}`,
		`[]`, `null`, `{}`, ``, `{"claims":[`, `{"claims":[{"claim_id":"x"`, `{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		b := testBuilder("github")
		var handed []Claim
		p, err := decodeFeedPage(strings.NewReader(body), func(c Claim) error {
			handed = append(handed, c)
			if err := b.add(c); err != nil {
				t.Fatalf("builder refused a decoded claim: %v", err)
			}
			return nil
		})
		// Read a byte at a time, so that every value crosses the reader's
		// buffer somewhere, the page decodes alike.
		var slow []Claim
		ps, serr := decodeFeedPage(iotest.OneByteReader(strings.NewReader(body)), func(c Claim) error { slow = append(slow, c); return nil })
		if (err == nil) != (serr == nil) || ps != p || !reflect.DeepEqual(slow, handed) {
			t.Fatalf("a byte at a time: %+v, %v, %+v; at once: %+v, %v, %+v", ps, serr, slow, p, err, handed)
		}
		if err != nil {
			return
		}
		if p.total < 0 || p.claims != len(handed) {
			t.Fatalf("page %+v after %d claims handed on", p, len(handed))
		}
		// The reference is the wire format's own definition.
		var ref feedwire.Page
		if err := json.Unmarshal([]byte(body), &ref); err != nil {
			t.Fatalf("accepted a page encoding/json refuses: %v", err)
		}
		var refClaims []Claim
		for _, r := range ref.Claims {
			refClaims = append(refClaims, Claim{ID: r.ClaimID, Namespace: r.Namespace, PublicKey: r.PublicKey, Service: r.Service,
				ApprovedAt: r.ApprovedAt, Subject: r.Subject, AgentID: r.AgentID, AgentName: r.AgentName})
		}
		if !reflect.DeepEqual(refClaims, handed) && (len(refClaims) > 0 || len(handed) > 0) ||
			ref.Pagination.Total != p.total || ref.Pagination.HasMore != p.hasMore {
			t.Fatalf("decoded %+v %+v; encoding/json: %+v", handed, p, ref)
		}
		s := mustBuild(t, b)
		if s.claims+s.skipped > p.claims {
			t.Fatalf("%d claims + %d skipped from %d records", s.claims, s.skipped, p.claims)
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
		e := newView(mustBuild(t, testBuilder("github"))).edit("github", new(heldmem.Counter))
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
