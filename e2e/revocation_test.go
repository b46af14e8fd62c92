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

// TestRejectionIsFinal runs a gateway that polls its control plane once an
// hour: the owner's rejection still reaches it within a second, and the
// rejected agent is then told so (403 AUTH_CLAIM_REJECTED with the claim it
// filed), not "pending", and files nothing new however often it comes back,
// until the owner approves the rejected claim.
func TestRejectionIsFinal(t *testing.T) {
	t.Parallel()
	cp := newControlPlane(t)
	agent, err := identity.New("acme")
	if err != nil {
		t.Fatal(err)
	}
	seeded := cp.seed(`{"namespaces":["acme"],"services":[{"slug":"github","owner":"acme"}]}`)
	w := &world{cp: cp, apiKey: seeded.APIKeys["github"], agent: agent}
	upstream := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, "ok") }))
	defer upstream.Close()
	gw := startGateway(t, w, func(c *gateway.Config) {
		c.Claims = claimcache.Options{TTL: 2 * time.Hour, RefreshInterval: time.Hour}
	}, bearer("github", upstream.URL, "upstream-token"))

	client := &http.Client{Timeout: 10 * time.Second}
	signed := func() answer { return call(t, client, "GET", gw.url+"/proxy/github/repos", agent, nil) }
	type refusal struct {
		ClaimID     string `json:"claim_id"`
		ClaimStatus string `json:"claim_status"`
	}
	refused := func(a answer, code string) refusal {
		t.Helper()
		a.want(t, http.StatusForbidden, code)
		var body refusal
		if err := json.Unmarshal(a.body, &body); err != nil || body.ClaimID == "" {
			t.Fatalf("refusal %s", a.body)
		}
		return body
	}
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
	claims := func() map[string]string {
		t.Helper()
		var page struct {
			Claims []struct {
				ID     string `json:"claim_id"`
				Status string `json:"status"`
			}
		}
		if err := json.Unmarshal(owner("GET", "/v1/namespaces/acme/claims"), &page); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, c := range page.Claims {
			out[c.ID] = c.Status
		}
		return out
	}

	var filed refusal
	eventually(t, 5*time.Second, "the claims' first load", func() bool { return signed().status == http.StatusForbidden })
	filed = refused(signed(), "AUTH_CLAIM_REQUIRED")
	if filed.ClaimStatus != "pending" {
		t.Fatalf("filed %+v", filed)
	}

	owner("POST", "/v1/claims/"+filed.ClaimID+"/reject")
	took := eventually(t, time.Second, "the rejection at the gateway", func() bool {
		var e envelope
		_ = json.Unmarshal(signed().body, &e)
		return e.Code == "AUTH_CLAIM_REJECTED"
	})
	t.Logf("the gateway told the agent of the rejection %v after the owner's", took)
	for range 3 {
		if got := refused(signed(), "AUTH_CLAIM_REJECTED"); got != (refusal{filed.ClaimID, "rejected"}) {
			t.Fatalf("refusal %+v, want claim %s rejected", got, filed.ClaimID)
		}
	}
	if got := claims(); len(got) != 1 || got[filed.ClaimID] != "rejected" {
		t.Fatalf("the rejected agent's claims %+v, want only %s rejected", got, filed.ClaimID)
	}

	// A gateway that has not seen the rejection (a restart reads the feed
	// afresh) files nothing either: the control plane answers the
	// rejected claim.
	fresh := startGateway(t, w, nil, bearer("github", upstream.URL, "upstream-token"))
	eventually(t, 5*time.Second, "the fresh gateway's first load", func() bool {
		return call(t, client, "GET", fresh.url+"/proxy/github/repos", agent, nil).status == http.StatusForbidden
	})
	if got := refused(call(t, client, "GET", fresh.url+"/proxy/github/repos", agent, nil), "AUTH_CLAIM_REJECTED"); got.ClaimID != filed.ClaimID {
		t.Fatalf("the fresh gateway's refusal %+v", got)
	}
	if got := claims(); len(got) != 1 {
		t.Fatalf("the rejected agent filed again: %+v", got)
	}

	owner("POST", "/v1/claims/"+filed.ClaimID+"/approve") // Approve on the rejected claim
	eventually(t, time.Second, "the approval at the gateway", func() bool { return signed().status == http.StatusOK })
}
