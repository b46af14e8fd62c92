package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
)

// TestRevocationReachesGatewayAtOnce runs a gateway that polls its control
// plane once an hour: the owner's revocation still reaches it within a
// second, through the request for changes it keeps waiting. The revoked
// agent is then told so (403 AUTH_CLAIM_REVOKED with its claim) and files
// nothing, however often it comes back, until the owner approves it again.
func TestRevocationReachesGatewayAtOnce(t *testing.T) {
	t.Parallel()
	cp := newControlPlane(t)
	agent, err := identity.New("acme")
	if err != nil {
		t.Fatal(err)
	}
	seeded := cp.seed(fmt.Sprintf(`{"namespaces":["acme"],"services":[{"slug":"github","owner":"acme"}],
		"claims":[{"namespace":"acme","service":"github","public_key":%q}]}`, agent.PublicKeyString()))
	w := &world{cp: cp, apiKey: seeded.APIKeys["github"], agent: agent}
	upstream := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, "ok") }))
	defer upstream.Close()
	gw := startGateway(t, w, func(c *gateway.Config) {
		c.Claims = claimcache.Options{TTL: 2 * time.Hour, RefreshInterval: time.Hour}
	}, bearer("github", upstream.URL, "upstream-token"))

	client := &http.Client{Timeout: 10 * time.Second}
	signed := func() answer { return call(t, client, "GET", gw.url+"/proxy/github/repos", agent, nil) }
	owner := func(method, path string) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, cp.url()+path, nil)
		req.AddCookie(&http.Cookie{Name: controlplane.SessionCookie, Value: seeded.Sessions["acme"]})
		a, err := do(client, req)
		if err != nil || a.status != http.StatusOK {
			t.Fatalf("%s %s: %d %s %v", method, path, a.status, a.body, err)
		}
		return a.body
	}
	// claims lists acme's claims in status (the ids are all this test reads).
	claims := func(status string) []string {
		t.Helper()
		var page struct {
			Claims []struct {
				ID string `json:"claim_id"`
			}
		}
		if err := json.Unmarshal(owner("GET", "/v1/namespaces/acme/claims?status="+status), &page); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range page.Claims {
			ids = append(ids, c.ID)
		}
		return ids
	}
	eventually(t, 5*time.Second, "the claims' first load", func() bool { return signed().status == http.StatusOK })
	approved := claims("approved")
	if len(approved) != 1 {
		t.Fatalf("approved claims %+v", approved)
	}
	id := approved[0]

	owner("POST", "/v1/claims/"+id+"/revoke")
	took := eventually(t, time.Second, "the revocation at the gateway", func() bool { return signed().status != http.StatusOK })
	t.Logf("the gateway refused the revoked agent %v after the owner's revocation", took)
	for range 3 {
		a := signed()
		a.want(t, http.StatusForbidden, "AUTH_CLAIM_REVOKED")
		var body struct {
			ClaimID     string `json:"claim_id"`
			ClaimStatus string `json:"claim_status"`
		}
		if err := json.Unmarshal(a.body, &body); err != nil || body.ClaimID != id || body.ClaimStatus != "revoked" {
			t.Fatalf("refusal %s", a.body)
		}
	}
	if pending := claims("pending"); len(pending) != 0 {
		t.Fatalf("the revoked agent filed %+v", pending)
	}

	owner("POST", "/v1/claims/"+id+"/approve") // the owner approves it again
	eventually(t, time.Second, "the approval at the gateway", func() bool { return signed().status == http.StatusOK })
}
