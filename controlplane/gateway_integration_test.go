package controlplane_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/openapicheck"
)

// TestGatewayClaimPath drives the control plane with the gateway's own
// client code (claimcache's submitter and feed source, signing with the
// gateway identity's transport): an unknown agent is submitted, approved by
// the owner, found on the next poll, and gone on the first poll after
// revocation.
func TestGatewayClaimPath(t *testing.T) {
	t.Parallel()
	ts, seeded := startSeededControlPlane(t)

	gw, _ := identity.New("gateway-local")
	client := &http.Client{Transport: gw.Transport(nil, identity.SignOptions{})}
	key := func(string) (string, error) { return seeded.APIKeys["github"], nil }
	cache, err := claimcache.New(claimcache.Config{
		Source:   &claimcache.HTTPSource{BaseURL: ts.URL, Client: client, APIKey: key},
		Services: []string{"github"},
	})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{BaseURL: ts.URL, Client: client, APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	agent, _ := identity.New("acme")
	lookup := func() error {
		t.Helper()
		if err := cache.Refresh(t.Context(), "github"); err != nil {
			t.Fatalf("refresh: %v", err)
		}
		_, err := cache.Lookup("github", "acme", agent.PublicKey)
		return err
	}
	if err := lookup(); !errors.Is(err, claimcache.ErrNotApproved) {
		t.Fatalf("before approval: %v", err)
	}

	s := claimcache.Submission{ConnectionID: "github", Namespace: "acme", PublicKey: identity.FormatPublicKey(agent.PublicKey), Service: "github", AgentIP: "192.0.2.10"}
	receipt, err := sub.Submit(t.Context(), s)
	if err != nil || !receipt.Created || receipt.Status != "pending" {
		t.Fatalf("submit: %+v %v", receipt, err)
	}
	if again, err := sub.Submit(t.Context(), s); err != nil || again.Created || again.ClaimID != receipt.ClaimID {
		t.Fatalf("resubmit: %+v %v", again, err)
	}

	owner := func(action string) { seeded.owner(t, "acme", receipt.ClaimID, action) }
	owner("approve")
	if err := lookup(); err != nil {
		t.Fatalf("after approval: %v", err)
	}
	if err := lookup(); err != nil { // no change since: an empty answer, snapshot renewed
		t.Fatalf("unchanged feed: %v", err)
	}
	owner("revoke")
	if err := lookup(); !errors.Is(err, claimcache.ErrNotApproved) {
		t.Fatalf("after revocation: %v", err)
	}
}

// seededWorld is what the seed endpoint answered, plus the server.
type seededWorld struct {
	base     string
	APIKeys  map[string]string `json:"api_keys"`
	Sessions map[string]string `json:"sessions"`
}

// startSeededControlPlane runs a control plane on SQLite with owner "acme"
// and its service "github".
func startSeededControlPlane(t *testing.T) (*httptest.Server, *seededWorld) {
	t.Helper()
	st, err := controlplane.Open(t.Context(), controlplane.StoreConfig{SQLitePath: filepath.Join(t.TempDir(), "cp.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	api, err := controlplane.New(controlplane.Config{Store: st, JWTSecret: bytes.Repeat([]byte("k"), 32), TestSeedToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(openapicheck.Watch(t, api))
	t.Cleanup(ts.Close)
	w := &seededWorld{base: ts.URL}
	w.post(t, `{"namespaces":["acme"],"services":[{"slug":"github","name":"GitHub","owner":"acme"}]}`, w)
	return ts, w
}

func (w *seededWorld) post(t *testing.T, body string, out any) {
	t.Helper()
	req, _ := http.NewRequest("POST", w.base+"/v1/test/seed", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", "tok")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("seed: %v %v", res, err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

// owner runs an owner action on a claim with the seeded session of ns.
func (w *seededWorld) owner(t *testing.T, ns, claimID, action string) {
	t.Helper()
	req, _ := http.NewRequest("POST", fmt.Sprintf("%s/v1/claims/%s/%s", w.base, claimID, action), nil)
	req.AddCookie(&http.Cookie{Name: controlplane.SessionCookie, Value: w.Sessions[ns]})
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("%s: %v %v", action, res, err)
	}
	res.Body.Close()
}
