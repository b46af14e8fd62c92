package claimcache_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
)

const testKey = "idn_sk_s3cr3t-Service-Key_0123456789abcdefghij"

// fakeControlPlane serves the approved-claims feed and claim submissions of
// one service, like the control plane's GET /v1/namespaces/claims and
// POST /v1/claims.
type fakeControlPlane struct {
	srv     *httptest.Server
	service string

	mu          sync.Mutex
	claims      []claimcache.Claim
	down        bool                // answer 503
	onPage      func(offset int)    // called before a page is served
	feedReqs    []*http.Request     // every feed request
	submissions []map[string]string // every accepted submission body
	byTuple     map[string]claimcache.Receipt
}

func newFakeControlPlane(t testing.TB, service string) *fakeControlPlane {
	f := &fakeControlPlane{service: service, byTuple: map[string]claimcache.Receipt{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/namespaces/claims", f.feed)
	mux.HandleFunc("POST /v1/claims", f.submit)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeControlPlane) approve(c ...claimcache.Claim) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims = append(f.claims, c...)
}

func (f *fakeControlPlane) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *fakeControlPlane) feedRequests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.feedReqs...)
}

// etag identifies the whole approved set, as HTTPSource requires.
func (f *fakeControlPlane) etag() string {
	h := sha256.New()
	for _, c := range f.claims {
		fmt.Fprintf(h, "%s\x00", c.ID)
	}
	return fmt.Sprintf(`"%x"`, h.Sum(nil)[:8])
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg, "code": code, "request_id": "req_1"})
}

func (f *fakeControlPlane) feed(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.feedReqs = append(f.feedReqs, r.Clone(r.Context()))
	onPage := f.onPage
	f.mu.Unlock()
	offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
	if onPage != nil {
		onPage(offset)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.down:
		writeError(w, http.StatusServiceUnavailable, "DATABASE_UNAVAILABLE", "down")
		return
	case r.Header.Get("Authorization") != "Bearer "+testKey:
		// A careless server echoes what it got; the client must not.
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "bad key "+r.Header.Get("Authorization"))
		return
	case r.URL.Query().Get("service") != f.service:
		writeError(w, http.StatusForbidden, "FORBIDDEN", "service differs")
		return
	}
	limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || limit < 1 || limit > 2000 || offset < 0 {
		writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "bad paging")
		return
	}
	tag := f.etag()
	w.Header().Set("ETag", tag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && inm == tag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	end := min(offset+limit, len(f.claims))
	page := []claimcache.Claim{}
	if offset < end {
		page = f.claims[offset:end]
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"claims": page,
		"pagination": map[string]any{
			"limit": limit, "offset": offset, "total": len(f.claims), "has_more": end < len(f.claims),
		},
	})
}

func (f *fakeControlPlane) submit(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+testKey {
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "bad key "+r.Header.Get("Authorization"))
		return
	}
	var body map[string]string
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "VALIDATION_ERROR", "bad body")
		return
	}
	if body["service"] != f.service {
		writeError(w, http.StatusForbidden, "FORBIDDEN", "service differs")
		return
	}
	f.submissions = append(f.submissions, body)
	tuple := body["namespace"] + "|" + body["public_key"]
	status := http.StatusOK
	rc, ok := f.byTuple[tuple]
	if !ok {
		rc = claimcache.Receipt{ClaimID: fmt.Sprintf("clm_%03d", len(f.byTuple)+1), Status: "pending"}
		f.byTuple[tuple] = rc
		status = http.StatusCreated
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"claim_id": rc.ClaimID, "status": rc.Status})
}

func (f *fakeControlPlane) submissionCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.submissions)
}

// agent is a test caller: a namespace and an Ed25519 key derived from a seed.
type agent struct {
	namespace string
	pub       ed25519.PublicKey
}

func newAgent(namespace string) agent {
	seed := sha256.Sum256([]byte(namespace))
	return agent{namespace, ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)}
}

func (a agent) header() string { return "ed25519:" + base64.StdEncoding.EncodeToString(a.pub) }

func (a agent) claim(id, service string) claimcache.Claim {
	return claimcache.Claim{
		ID: id, Namespace: a.namespace, PublicKey: a.header(), Service: service,
		ApprovedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func keyFor(string) (string, error) { return testKey, nil }
