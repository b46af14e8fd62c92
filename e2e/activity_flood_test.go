package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing"
)

// Figures of TestStrangersCannotFloodTheTrail.
const (
	floodRequests   = 20_000
	genuineRequests = 50
	floodWorkers    = 16
	// floodCap is the owner's bound on records: small, so that eviction
	// would show within the test.
	floodCap = 2_000
)

// TestStrangersCannotFloodTheTrail (issue 37, finding 3): tens of
// thousands of unsigned requests through a paired gateway, each naming a
// connection of its own, while an approved agent sends 50 signed ones,
// write no per-request record and cost the agent none of its records.
func TestStrangersCannotFloodTheTrail(t *testing.T) {
	cp := newControlPlane(t)
	cp.stop()
	cp.activity = controlplane.ActivityConfig{MaxPerNamespace: floodCap}
	cp.start()
	agent, err := identity.New("acme")
	if err != nil {
		t.Fatal(err)
	}
	seeded := cp.seed(fmt.Sprintf(`{"namespaces":["acme"],"services":[{"slug":"github","owner":"acme"}],
		"claims":[{"namespace":"acme","service":"github","public_key":%q}]}`, agent.PublicKeyString()))
	session := seeded.Sessions["acme"]
	w := &world{cp: cp, apiKey: seeded.APIKeys["github"], agent: agent}
	upstream := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, "ok") }))
	defer upstream.Close()
	dir := t.TempDir()
	gw := startGateway(t, w, func(c *gateway.Config) {
		c.DataDir = dir
		c.Claims = claimcache.Options{TTL: 2 * time.Hour, RefreshInterval: time.Hour}
	}, bearer("github", upstream.URL, "upstream-token"))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: floodWorkers}}
	owner := func(method, path string) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, cp.url()+path, nil)
		req.AddCookie(&http.Cookie{Name: controlplane.SessionCookie, Value: session})
		a, err := do(client, req)
		if err != nil || a.status/100 != 2 {
			t.Fatalf("%s %s: %d %s %v", method, path, a.status, a.body, err)
		}
		return a.body
	}
	pairWith(t, owner, cp.url(), gw.gw, dir)

	signed := func() int { return call(t, client, "GET", gw.url+"/proxy/github/user", agent, nil).status }
	mine := func() int {
		var l struct{ Activity []json.RawMessage }
		json.Unmarshal(owner("GET", "/v1/activity?limit=200&agent="+url.QueryEscape(agent.PublicKeyString())), &l)
		return len(l.Activity)
	}
	eventually(t, 5*time.Second, "the claims' first load", func() bool { return signed() == http.StatusOK })
	// The reporter reads the pairing state every 2 s.
	eventually(t, 15*time.Second, "the gateway to report as paired", func() bool { signed(); return mine() > 0 })
	want := mine() + genuineRequests

	var refused atomic.Int64
	var wg sync.WaitGroup
	for i := range floodWorkers {
		wg.Go(func() {
			for j := i; j < floodRequests; j += floodWorkers {
				a, err := try(client, "GET", fmt.Sprintf("%s/proxy/conn-%d/confirm/XkQz%d", gw.url, j, j), nil, nil)
				if err == nil && a.status/100 == 4 {
					refused.Add(1)
				}
			}
		})
	}
	for range genuineRequests {
		if status := signed(); status != http.StatusOK {
			t.Fatalf("a signed request answered %d", status)
		}
	}
	wg.Wait()
	if refused.Load() != floodRequests {
		t.Fatalf("%d of %d unsigned requests were refused", refused.Load(), floodRequests)
	}

	// A record that never arrives cannot be awaited: wait for the last
	// genuine one a while, then count what is there.
	deadline := time.Now().Add(20 * time.Second)
	for mine() < want && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	unsigned, genuine := 0, 0
	sc := bufio.NewScanner(bytes.NewReader(owner("GET", "/v1/activity/export")))
	for sc.Scan() {
		var r struct {
			AgentKey string `json:"agent_key"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		switch r.AgentKey {
		case "":
			unsigned++
		case agent.PublicKeyString():
			genuine++
		}
	}
	t.Logf("%d unsigned requests: %d per-request records written; genuine records kept: %d of %d",
		floodRequests, unsigned, genuine, want)
	// Records of the signed requests made while waiting for the pairing
	// may still be on their way when want is read, so more can arrive;
	// none may be missing.
	if unsigned != 0 || genuine < want {
		t.Errorf("the flood wrote %d records and left %d of %d genuine ones", unsigned, genuine, want)
	}
	// The owner reads how many were refused, and why.
	counted := func() (n int64) {
		var l struct {
			Unverified []struct {
				Reason string `json:"reason"`
				Count  int64  `json:"count"`
			} `json:"unverified"`
		}
		json.Unmarshal(owner("GET", "/v1/activity/unverified?limit=1000"), &l)
		for _, c := range l.Unverified {
			n += c.Count
		}
		return n
	}
	eventually(t, 10*time.Second, "the refusals to be counted", func() bool { return counted() >= floodRequests })
	if n := counted(); n != floodRequests {
		t.Errorf("%d refusals counted, want %d", n, floodRequests)
	}
}

// pairWith pairs gateway gw, of data directory dir, with the owner that
// owner calls as, as `gateway pair` does, until the test ends.
func pairWith(t *testing.T, owner func(method, path string) []byte, cpURL string, gw *gateway.Gateway, dir string) {
	t.Helper()
	var p struct {
		SessionID string `json:"session_id"`
		Code      string `json:"pair_code"`
	}
	if err := json.Unmarshal(owner("POST", "/v1/gateways/pairings"), &p); err != nil {
		t.Fatal(err)
	}
	key, err := credvault.GenerateMasterKey()
	if err != nil {
		t.Fatal(err)
	}
	client, err := pairing.New(pairing.Config{ControlPlaneURL: cpURL, Identity: gw.Identity(), Admin: gw.Admin(), DataDir: dir,
		MasterKey: key, Name: "flooded"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- client.Run(ctx, &pairing.Pairing{SessionID: p.SessionID, Code: p.Code, Namespace: "acme"})
	}()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, 10*time.Second, "the gateway to pair", func() bool { _, ok := client.State(); return ok })
}
