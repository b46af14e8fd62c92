package claimcache_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/idnhq/idn/claimcache"
)

// TestEmptyKeySendsNoAuthorization: an empty API key with a nil error
// leaves the Authorization header out of the feed reads, the change reads
// and the submissions, so they stand on the client's signature alone (a
// paired gateway's); a key is sent as a bearer token.
func TestEmptyKeySendsNoAuthorization(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		seen = map[string][]string{} // path?since → Authorization values
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		what := r.Method + " " + r.URL.Path
		if r.URL.Query().Has("since") {
			what += " since"
		}
		mu.Lock()
		seen[what] = r.Header.Values("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"claim_id":"clm_1","status":"pending"}`))
		case r.URL.Query().Has("since"):
			w.Write([]byte(`{"changes":[],"cursor":"7","more":false}`))
		default:
			w.Write([]byte(`{"claims":[],"cursor":"7","pagination":{"limit":2000,"offset":0,"total":0,"has_more":false}}`))
		}
	}))
	t.Cleanup(srv.Close)

	for _, key := range []string{"", "idn_sk_test"} {
		clear(seen)
		apiKey := func(string) (string, error) { return key, nil }
		src := &claimcache.HTTPSource{BaseURL: srv.URL, Client: srv.Client(), APIKey: apiKey}
		version, err := src.ApprovedClaims(context.Background(), "weather", "", func(claimcache.Claim) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.ClaimChanges(context.Background(), "weather", version, func(claimcache.Change) error { return nil }); err != nil {
			t.Fatal(err)
		}
		sub, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{BaseURL: srv.URL, Client: srv.Client(), APIKey: apiKey})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sub.Submit(context.Background(), claimcache.Submission{ConnectionID: "weather", Namespace: "alice",
			PublicKey: "ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", Service: "weather"}); err != nil {
			t.Fatal(err)
		}
		want := []string(nil)
		if key != "" {
			want = []string{"Bearer " + key}
		}
		for _, what := range []string{"GET /v1/namespaces/claims", "GET /v1/namespaces/claims since", "POST /v1/claims"} {
			got, ok := seen[what]
			if !ok {
				t.Fatalf("key %q: no %s was sent", key, what)
			}
			if len(got) != len(want) || (len(want) == 1 && got[0] != want[0]) {
				t.Errorf("key %q: %s sent Authorization %q, want %q", key, what, got, want)
			}
		}
	}
}
