package controlplane

import (
	"context"
	"maps"
	mathrand "math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/feedwire"
	"github.com/idnhq/idn/identity"
)

// syncFeedHTTP applies the changes after cursor, read through the API two
// at a time, to m, showing each to seen, and returns the new cursor.
func syncFeedHTTP(t *testing.T, feed func(string) resp, m feedModel, cursor string, seen ...func(map[string]any)) string {
	t.Helper()
	for {
		a := feed("?limit=2&since="+cursor).want(t, 200, "").json(t)
		for _, c := range a["changes"].([]any) {
			c := c.(map[string]any)
			for _, f := range seen {
				f(c)
			}
			if c["service"] != "github" || c["namespace"] != "acme" || c["public_key"] == "" {
				t.Fatalf("change %v", c)
			}
			if _, has := c["approved_at"]; has != (c["op"] == "upsert") {
				t.Fatalf("change %v: approved_at belongs to upserts only", c)
			}
			m.apply(c["op"].(string), c["namespace"].(string), c["public_key"].(string), c["claim_id"].(string))
		}
		cursor = a["cursor"].(string)
		if a["more"] == false {
			return cursor
		}
	}
}

// fullFeedHTTP reads every approved claim of the feed, page by page.
func fullFeedHTTP(t *testing.T, feed func(string) resp) feedModel {
	t.Helper()
	m, after := feedModel{}, ""
	for {
		q := "?limit=100"
		if after != "" {
			q += "&after=" + after
		}
		a := feed(q).want(t, 200, "").json(t)
		list := a["claims"].([]any)
		for _, c := range list {
			c := c.(map[string]any)
			m.apply("upsert", c["namespace"].(string), c["public_key"].(string), c["claim_id"].(string))
		}
		if len(list) == 0 || a["pagination"].(map[string]any)["has_more"] != true {
			return m
		}
		after = list[len(list)-1].(map[string]any)["claim_id"].(string)
	}
}

// feedModel is what a gateway holds: tuple (namespace, public key) → claim id.
type feedModel map[string]string

func (m feedModel) apply(op, ns, pub, id string) {
	k := ns + " " + pub
	switch {
	case op == feedwire.OpUpsert:
		m[k] = id
	case m[k] == id:
		delete(m, k)
	}
}

// seedClaims inserts n claims of service github in namespace acme with the
// given status and returns their ids.
func seedClaims(t testing.TB, st *Store, n int, status string) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		c, err := claimsAPI(st).Seed(context.Background(), Claim{Namespace: "acme", PublicKey: pubKey(newAgent(t, "acme")),
			Service: "github", Status: status})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = c.ID
	}
	return ids
}

func TestFeedChanges(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		owner, key := claimWorld(e)
		st := e.st
		approved := seedClaims(t, st, 3, StatusApproved)
		pending := seedClaims(t, st, 3, StatusPending)
		feed := func(q string) resp {
			return e.signed("GET", "/v1/namespaces/claims"+q, nil, withKey(key))
		}
		first := feed("?limit=2").want(t, 200, "").json(t)
		cursor := first["cursor"].(string)
		held := fullFeedHTTP(t, feed)

		// Nothing changed: the cursor stays.
		m := feed("?since="+cursor).want(t, 200, "").json(t)
		if len(m["changes"].([]any)) != 0 || m["cursor"] != cursor || m["more"] != false {
			t.Fatalf("unchanged feed: %v", m)
		}
		if m := feed("?wait=0&since="+cursor).want(t, 200, "").json(t); len(m["changes"].([]any)) != 0 || m["cursor"] != cursor {
			t.Fatalf("unchanged feed, no wait: %v", m)
		}
		for _, w := range []string{"31", "-1", "1.5", "x", ""} {
			feed("?since="+cursor+"&wait="+w).want(t, 400, "VALIDATION_ERROR")
		}

		e.do("POST", "/v1/claims/"+pending[0]+"/approve", nil, owner).want(t, 200, "")
		e.do("POST", "/v1/claims/"+pending[1]+"/reject", nil, owner).want(t, 200, "") // a delete of a claim no tuple holds
		e.do("POST", "/v1/claims/"+approved[0]+"/revoke", nil, owner).want(t, 200, "")
		e.do("POST", "/v1/claims/"+pending[2]+"/approve", nil, owner).want(t, 200, "")
		e.do("POST", "/v1/claims/"+pending[2]+"/revoke", nil, owner).want(t, 200, "")

		var ops []string
		cursor = syncFeedHTTP(t, feed, held, cursor, func(c map[string]any) {
			op := c["op"].(string)
			if c["status"] != nil {
				op += "(" + c["status"].(string) + ")"
			}
			ops = append(ops, op+" "+c["claim_id"].(string))
		})
		want := []string{"upsert " + pending[0], "delete(rejected) " + pending[1], "delete " + approved[0], "upsert " + pending[2], "delete " + pending[2]}
		if strings.Join(ops, ",") != strings.Join(want, ",") {
			t.Fatalf("changes %v, want %v", ops, want)
		}
		if full := fullFeedHTTP(t, feed); !maps.Equal(held, full) {
			t.Fatalf("synced %v, full read %v", held, full)
		}

		t.Run("paging after a claim skips none when an earlier one is revoked", func(t *testing.T) {
			first := feed("?limit=2").want(t, 200, "").json(t)["claims"].([]any)
			last := first[1].(map[string]any)["claim_id"].(string)
			e.do("POST", "/v1/claims/"+first[0].(map[string]any)["claim_id"].(string)+"/revoke", nil, owner).want(t, 200, "")
			full := fullFeedHTTP(t, feed)
			rest := feed("?limit=100&after="+last).want(t, 200, "").json(t)["claims"].([]any)
			if len(rest) != len(full)-1 {
				t.Fatalf("after %s: %d claims, want %d", last, len(rest), len(full)-1)
			}
			feed("?after=clm_nope").want(t, 400, "VALIDATION_ERROR")
			feed("?after="+last+"&offset=2").want(t, 400, "VALIDATION_ERROR")
			feed("?after="+pending[1]).want(t, 400, "VALIDATION_ERROR") // rejected, never in the feed
			cursor = syncFeedHTTP(t, feed, held, cursor)
		})
		t.Run("bad cursors", func(t *testing.T) {
			feed("?since=").want(t, 400, "VALIDATION_ERROR")
			feed("?since=-1").want(t, 400, "VALIDATION_ERROR")
			feed("?since=01").want(t, 400, "VALIDATION_ERROR")
			feed("?since=1&offset=0").want(t, 400, "VALIDATION_ERROR")
			feed("?since=1&limit=0").want(t, 400, "VALIDATION_ERROR")
			// A cursor this database never issued (another database's, or
			// from before a restore) is not trusted to be complete.
			feed("?since=999999").want(t, 410, "FEED_CURSOR_EXPIRED")
		})
		t.Run("service deletion revokes through the feed", func(t *testing.T) {
			var svcID string
			if err := st.db.QueryRowContext(context.Background(), `SELECT id FROM services WHERE slug = 'github'`).Scan(&svcID); err != nil {
				t.Fatal(err)
			}
			held := maps.Clone(held)
			c0, _ := feedwire.ParseCursor(cursor)
			e.do("DELETE", "/v1/services/"+svcID, nil, owner).want(t, 204, "")
			// The service's key is gone with it: read its changes as
			// stored.
			rows, err := st.db.QueryContext(context.Background(), `SELECT op, namespace, public_key, claim_id FROM feed_changes
				WHERE service = 'github' AND seq > $1 ORDER BY seq`, c0)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var op, ns, pub, id string
				rows.Scan(&op, &ns, &pub, &id)
				held.apply(op, ns, pub, id)
			}
			rows.Close()
			if len(held) != 0 {
				t.Fatalf("after deleting the service the feed still holds %v", held)
			}
		})
	})
}

// fullRead hides ClaimChanges: a Cache over it reads every claim on each
// refresh, the reference the syncing one must match.
type fullRead struct{ src *claimcache.HTTPSource }

func (f fullRead) ApprovedClaims(ctx context.Context, service, version string, add func(claimcache.Claim) error) (string, error) {
	return f.src.ApprovedClaims(ctx, service, version, add)
}

// TestClaimCacheConvergesOnFeed: the gateway's claims cache, syncing by
// changes from this control plane, holds after every round of random
// approvals and revocations exactly what a cache that reads every claim
// holds, on both engines.
func TestClaimCacheConvergesOnFeed(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, openStore(t, storeConfig(t, engine)), func(c *Config) { c.SignedRatePerMinute = 1 << 20 })
			_, key := claimWorld(e)
			agents := make([]*identity.Identity, 30)
			ids := make([]string, len(agents))
			for i := range agents {
				agents[i] = newAgent(t, "acme")
				c, err := claimsAPI(e.st).Seed(t.Context(), Claim{Namespace: "acme", PublicKey: pubKey(agents[i]), Service: "github", Status: StatusPending})
				if err != nil {
					t.Fatal(err)
				}
				ids[i] = c.ID
			}
			src := &claimcache.HTTPSource{BaseURL: e.ts.URL, Client: &http.Client{Transport: e.agent.Transport(nil, identity.SignOptions{})},
				APIKey: func(string) (string, error) { return key, nil }, PageSize: 3}
			caches := make([]*claimcache.Cache, 2)
			for i, s := range []claimcache.Source{src, fullRead{src}} {
				c, err := claimcache.New(claimcache.Config{Source: s, Services: []string{"github"}})
				if err != nil {
					t.Fatal(err)
				}
				caches[i] = c
			}
			rng := mathrand.New(mathrand.NewPCG(3, 4))
			held := 0
			defer func() {
				if held == 0 {
					t.Error("no round held a claim: the test proved nothing")
				}
			}()
			for round := range 12 {
				for range rng.IntN(6) {
					i := rng.IntN(len(ids))
					action := "approve"
					if status := latestStatus(t, e.st, "acme", pubKey(agents[i]), "github"); status == StatusApproved {
						action = "revoke"
					} else if status == StatusRevoked {
						nc, err := claimsAPI(e.st).Seed(t.Context(), Claim{Namespace: "acme", PublicKey: pubKey(agents[i]), Service: "github", Status: StatusPending})
						if err != nil {
							t.Fatal(err)
						}
						ids[i] = nc.ID
					}
					move(t, e.st, ids[i], action)
				}
				for _, c := range caches {
					if err := c.Refresh(t.Context(), "github"); err != nil {
						t.Fatal(err)
					}
				}
				if a, b := caches[0].Status("github").Claims, caches[1].Status("github").Claims; a != b {
					t.Fatalf("round %d: %d claims synced, %d read", round, a, b)
				}
				held = max(held, caches[0].Status("github").Claims)
				for _, a := range agents {
					x, errX := caches[0].Lookup("github", "acme", a.PublicKey)
					y, errY := caches[1].Lookup("github", "acme", a.PublicKey)
					if x != y || (errX == nil) != (errY == nil) {
						t.Fatalf("round %d: synced %+v %v, read %+v %v", round, x, errX, y, errY)
					}
				}
			}
		})
	}
}

// TestCloseEndsFeedWaits: once the server closes (http.Server.Shutdown
// runs Close first), a request for changes is answered at once instead of
// held for its wait, so the waits cannot hold up the shutdown.
func TestCloseEndsFeedWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	_, key := claimWorld(e)
	cursor := e.signed("GET", "/v1/namespaces/claims", nil, withKey(key)).want(t, 200, "").json(t)["cursor"].(string)
	e.srv.Close()
	done := make(chan resp, 1)
	go func() { done <- e.signed("GET", "/v1/namespaces/claims?wait=30&since="+cursor, nil, withKey(key)) }()
	select {
	case r := <-done:
		if m := r.want(t, 200, "").json(t); len(m["changes"].([]any)) != 0 || m["cursor"] != cursor {
			t.Fatalf("answered %v", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request was held after Close")
	}
}
