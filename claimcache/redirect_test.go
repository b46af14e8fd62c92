package claimcache_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/identity"
)

// A control plane (or whoever answers in its place) that redirects the feed
// or a claim submission gets neither the API key nor the gateway's
// signature sent to the URL it names: the 3xx is the answer, with or
// without a signing client, whatever the client's CheckRedirect says.
func TestControlPlaneRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	gatewayID, err := identity.New("gateway-1")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var leaked []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Method+" "+r.URL.Path+" authorization="+r.Header.Get("Authorization")+" signature="+r.Header.Get("Signature"))
		mu.Unlock()
	}))
	defer collector.Close()
	clients := map[string]*http.Client{
		"default client":   nil,
		"signing client":   {Transport: gatewayID.Transport(nil, identity.SignOptions{})},
		"following client": {CheckRedirect: func(*http.Request, []*http.Request) error { return nil }},
	}
	key := func(string) (string, error) { return "idn_sk_the-service-key", nil }
	for _, code := range []int{301, 302, 303, 307, 308} {
		hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, collector.URL+r.URL.Path, code)
		}))
		defer hostile.Close()
		for name, client := range clients {
			t.Run("control plane answers "+strconv.Itoa(code)+", "+name, func(t *testing.T) {
				src := &claimcache.HTTPSource{BaseURL: hostile.URL, Client: client, APIKey: key}
				_, err := src.ApprovedClaims(context.Background(), "github", "", func(claimcache.Claim) error { return nil })
				var se *claimcache.StatusError
				if !errors.As(err, &se) || se.StatusCode != code {
					t.Errorf("feed: %v, want StatusError %d", err, code)
				}
				s, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{BaseURL: hostile.URL, Client: client, APIKey: key})
				if err != nil {
					t.Fatal(err)
				}
				_, err = s.Submit(context.Background(), claimcache.Submission{
					ConnectionID: "github", Namespace: "alice", PublicKey: newAgent("alice").header(), Service: "github",
				})
				if !errors.As(err, &se) || se.StatusCode != code {
					t.Errorf("submit: %v, want StatusError %d", err, code)
				}
			})
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) != 0 {
		t.Errorf("the redirect target received %q", leaked)
	}
}
