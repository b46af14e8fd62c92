package claimcachetest_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/identity"
)

func agentKey(name string) string {
	seed := sha256.Sum256([]byte(name))
	return identity.FormatPublicKey(ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey))
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func call(t *testing.T, method, url, key, etag, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &a.body); err != nil {
			t.Fatalf("%s %s: answer %q is not JSON", method, url, b)
		}
	}
	return a
}

// want fails the test unless the answer is status with the envelope's code.
func (a answer) want(t *testing.T, status int, code string) {
	t.Helper()
	if a.status != status || a.body["code"] != code {
		t.Fatalf("answer %d %v, want %d %s", a.status, a.body, status, code)
	}
}

// The feed pages the approved claims of the key's service, with an ETag
// per page that changes with the set, and a 304 to a matching
// If-None-Match.
func TestFeedPagesWithETags(t *testing.T) {
	t.Parallel()
	cp := claimcachetest.NewServer()
	defer cp.Close()
	for i := range 3 {
		cp.Approve(claimcache.Claim{ID: fmt.Sprintf("clm_%d", i), Namespace: "alice", PublicKey: agentKey(fmt.Sprint(i)), Service: "github"})
	}
	cp.Approve(claimcache.Claim{Namespace: "bob", PublicKey: agentKey("bob"), Service: "gitlab"})
	key := cp.APIKey("github")
	feed := func(q, etag string) answer {
		return call(t, http.MethodGet, cp.URL+"/v1/namespaces/claims?"+q, key, etag, "")
	}

	first := feed("service=github&limit=2&offset=0", "")
	second := feed("service=github&limit=2&offset=2", "")
	if first.status != 200 || second.status != 200 {
		t.Fatalf("pages: %d %d", first.status, second.status)
	}
	if got := fmt.Sprint(first.body["pagination"]); got != "map[has_more:true limit:2 offset:0 total:3]" {
		t.Errorf("first pagination %s", got)
	}
	if got := fmt.Sprint(second.body["pagination"]); got != "map[has_more:false limit:2 offset:2 total:3]" {
		t.Errorf("second pagination %s", got)
	}
	if claims := second.body["claims"].([]any); len(claims) != 1 || claims[0].(map[string]any)["claim_id"] != "clm_2" {
		t.Errorf("second page %v", claims)
	}
	etag := first.header.Get("ETag")
	if etag == "" || etag == second.header.Get("ETag") {
		t.Fatalf("ETags %q and %q", etag, second.header.Get("ETag"))
	}
	if a := feed("service=github&limit=2&offset=0", etag); a.status != http.StatusNotModified {
		t.Fatalf("unchanged page with its ETag: %d", a.status)
	}
	if a := feed("limit=2", etag); a.status != http.StatusNotModified {
		t.Fatalf("the key names the service, offset defaults to 0: %d", a.status)
	}
	cp.Revoke("clm_0")
	if a := feed("service=github&limit=2&offset=0", etag); a.status != 200 || a.header.Get("ETag") == etag {
		t.Fatalf("after a revocation: %d, ETag %q", a.status, a.header.Get("ETag"))
	}
	if a := feed("", ""); fmt.Sprint(a.body["pagination"]) != "map[has_more:false limit:500 offset:0 total:2]" {
		t.Errorf("default paging %v", a.body["pagination"])
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	cp := claimcachetest.NewServer()
	defer cp.Close()
	github := cp.APIKey("github")
	feed := cp.URL + "/v1/namespaces/claims"
	submit := cp.URL + "/v1/claims"
	good := `{"namespace":"alice","public_key":"` + agentKey("alice") + `","service":"github"}`
	tests := []struct {
		name, method, url, key, body string
		status                       int
		code                         string
	}{
		{"no key", "GET", feed, "", "", 401, "API_KEY_INVALID"},
		{"made-up key", "GET", feed, "idn_sk_test_github_0000000000000000", "", 401, "API_KEY_INVALID"},
		{"key of another service reads its feed", "GET", feed + "?service=gitlab", github, "", 403, "SERVICE_MISMATCH"},
		{"key of another service submits for it", "POST", submit, github,
			`{"namespace":"alice","public_key":"` + agentKey("alice") + `","service":"gitlab"}`, 403, "SERVICE_MISMATCH"},
		{"limit over 2000", "GET", feed + "?limit=2001", github, "", 400, "VALIDATION_ERROR"},
		{"negative offset", "GET", feed + "?offset=-1", github, "", 400, "VALIDATION_ERROR"},
		{"misspelt field", "POST", submit, github, strings.Replace(good, `"service"`, `"servce"`, 1), 400, "VALIDATION_ERROR"},
		{"two objects", "POST", submit, github, good + good, 400, "VALIDATION_ERROR"},
		{"bad public key", "POST", submit, github, strings.Replace(good, agentKey("alice"), "ed25519:AAAA", 1), 400, "VALIDATION_ERROR"},
		{"bad namespace", "POST", submit, github, strings.Replace(good, `"alice"`, `"a"`, 1), 400, "NAMESPACE_INVALID"},
		{"bad agent ip", "POST", submit, github, strings.Replace(good, `}`, `,"agent_ip":"local"}`, 1), 400, "VALIDATION_ERROR"},
		{"wrong method", "DELETE", submit, github, "", 405, "METHOD_NOT_ALLOWED"},
		{"unknown route", "GET", cp.URL + "/v1/claims/clm_1", github, "", 404, "NOT_FOUND"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := call(t, tt.method, tt.url, tt.key, "", tt.body)
			if a.status != tt.status || a.body["code"] != tt.code {
				t.Fatalf("%d %v, want %d %s", a.status, a.body, tt.status, tt.code)
			}
		})
	}
	if n := len(cp.Submissions()); n != 0 {
		t.Fatalf("%d refused submissions recorded", n)
	}

	cp.SetUnavailable(true)
	if a := call(t, "GET", feed, github, "", ""); a.status != 503 || a.body["code"] != "DATABASE_UNAVAILABLE" {
		t.Fatalf("unavailable: %d %v", a.status, a.body)
	}
	cp.SetUnavailable(false)
	if a := call(t, "GET", feed, github, "", ""); a.status != 200 {
		t.Fatalf("available again: %d %v", a.status, a.body)
	}
	if n := len(cp.Requests()); n != len(tests)+2 {
		t.Fatalf("%d requests recorded, want %d", n, len(tests)+2)
	}
}

// A submission makes a pending claim the feed does not serve; a repeat is
// answered with the same claim; approval puts it in the feed under its id;
// after a revocation the tuple submits as a new claim.
func TestSubmissionLifecycle(t *testing.T) {
	t.Parallel()
	cp := claimcachetest.NewServer()
	defer cp.Close()
	key := cp.APIKey("github")
	body := `{"namespace":"alice","public_key":"` + agentKey("alice") + `","service":"github","subject":"ci","nonce":"n1"}`
	submit := func() answer { return call(t, "POST", cp.URL+"/v1/claims", key, "", body) }
	total := func() any {
		return call(t, "GET", cp.URL+"/v1/namespaces/claims", key, "", "").body["pagination"].(map[string]any)["total"]
	}

	first := submit()
	if first.status != 201 || first.body["status"] != "pending" {
		t.Fatalf("first submission: %d %v", first.status, first.body)
	}
	id := first.body["claim_id"].(string)
	if again := submit(); again.status != 200 || again.body["claim_id"] != id {
		t.Fatalf("repeat: %d %v", again.status, again.body)
	}
	if n := total(); n != 0.0 {
		t.Fatalf("a pending claim is in the feed (total %v)", n)
	}
	subs := cp.Submissions()
	want := claimcachetest.Submission{ClaimID: id, Created: true, Namespace: "alice", PublicKey: agentKey("alice"),
		Service: "github", Subject: "ci", Nonce: "n1"}
	if len(subs) != 2 || subs[0] != want || subs[1].Created {
		t.Fatalf("submissions %+v", subs)
	}

	approved := cp.Approve(claimcache.Claim{Namespace: "alice", PublicKey: agentKey("alice"), Service: "github"})
	if approved.ID != id || approved.Subject != "ci" || approved.ApprovedAt.IsZero() || total() != 1.0 {
		t.Fatalf("approved %+v, feed total %v", approved, total())
	}
	if a := submit(); a.status != 200 || a.body["status"] != "approved" {
		t.Fatalf("submission of an approved tuple: %d %v", a.status, a.body)
	}
	if !cp.Revoke(id) || cp.Revoke(id) || total() != 0.0 {
		t.Fatal("revocation")
	}
	// The revoked tuple files nothing until the owner approves it again.
	if a := submit(); a.status != 200 || a.body["claim_id"] != id || a.body["status"] != "revoked" {
		t.Fatalf("submission after revocation: %d %v", a.status, a.body)
	}
	again := cp.Approve(claimcache.Claim{Namespace: "alice", PublicKey: agentKey("alice"), Service: "github"})
	if a := submit(); again.ID == id || a.status != 200 || a.body["claim_id"] != again.ID || a.body["status"] != "approved" {
		t.Fatalf("submission after approving again: %d %v", a.status, a.body)
	}
}

func TestFeedChanges(t *testing.T) {
	t.Parallel()
	s := claimcachetest.NewServer()
	defer s.Close()
	key := s.APIKey("github")
	feed := s.URL + "/v1/namespaces/claims"
	a := s.Approve(claimcache.Claim{Namespace: "alice", PublicKey: agentKey("alice"), Service: "github"})
	cursor := call(t, "GET", feed, key, "", "").body["cursor"].(string)
	b := s.Approve(claimcache.Claim{Namespace: "bob", PublicKey: agentKey("bob"), Service: "github", Subject: "bob"})
	s.Revoke(a.ID)
	s.Approve(claimcache.Claim{Namespace: "carol", PublicKey: agentKey("carol"), Service: "slack"})

	got := call(t, "GET", feed+"?since="+cursor, key, "", "")
	changes := got.body["changes"].([]any)
	if got.status != 200 || len(changes) != 2 || got.body["more"] != false || got.body["cursor"] == cursor {
		t.Fatalf("changes: %d %v", got.status, got.body)
	}
	up, del := changes[0].(map[string]any), changes[1].(map[string]any)
	if up["op"] != "upsert" || up["claim_id"] != b.ID || up["subject"] != "bob" || del["op"] != "delete" || del["claim_id"] != a.ID || del["approved_at"] != nil {
		t.Fatalf("changes %v", changes)
	}
	next := got.body["cursor"].(string)
	if again := call(t, "GET", feed+"?since="+next, key, "", ""); len(again.body["changes"].([]any)) != 0 || again.body["cursor"] != next {
		t.Fatalf("no changes: %v", again.body)
	}
	if got := call(t, "GET", feed+"?since="+cursor+"&limit=1", key, "", ""); len(got.body["changes"].([]any)) != 1 || got.body["more"] != true {
		t.Fatalf("limit 1: %v", got.body)
	}
	call(t, "GET", feed+"?since=x", key, "", "").want(t, 400, "VALIDATION_ERROR")
	call(t, "GET", feed+"?since=99", key, "", "").want(t, 410, "FEED_CURSOR_EXPIRED")
	s.ExpireChanges()
	call(t, "GET", feed+"?since="+cursor, key, "", "").want(t, 410, "FEED_CURSOR_EXPIRED")
	if got := call(t, "GET", feed+"?since="+next, key, "", ""); got.status != 200 {
		t.Fatalf("the current cursor after expiry: %d", got.status)
	}
}
