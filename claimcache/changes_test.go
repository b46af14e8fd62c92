package claimcache_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
)

// fullSource hides HTTPSource's ClaimChanges: a Cache over it reads every
// claim on each refresh, the reference the incremental one must match.
type fullSource struct{ src *claimcache.HTTPSource }

func (f fullSource) ApprovedClaims(ctx context.Context, service, version string, add func(claimcache.Claim) error) (string, error) {
	return f.src.ApprovedClaims(ctx, service, version, add)
}

func newCache(t *testing.T, src claimcache.Source) *claimcache.Cache {
	t.Helper()
	c, err := claimcache.New(claimcache.Config{Source: src, Services: []string{"github"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sinceRequests counts the feed requests of cp after the first skip: those
// for changes and those for pages.
func feedRequests(cp *claimcachetest.Server, skip int) (changes, pages int) {
	for _, r := range cp.Requests()[skip:] {
		if r.URL.Query().Has("since") {
			changes++
		} else {
			pages++
		}
	}
	return changes, pages
}

func TestCacheSyncsChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	alice, bob, carol := newAgent("alice"), newAgent("bob"), newAgent("carol")
	cp := newControlPlane(t, fiveClaims()...)
	cp.Approve(alice.claim("clm_alice", "github"))
	c := newCache(t, &claimcache.HTTPSource{BaseURL: cp.URL, APIKey: keysOf(cp), PageSize: 2})
	if err := c.Refresh(ctx, "github"); err != nil {
		t.Fatal(err)
	}
	loaded := len(cp.Requests())

	cp.Revoke("clm_alice")
	cp.Approve(bob.claim("clm_bob", "github"))
	cp.Approve(carol.claim("clm_carol1", "github"))
	cp.Approve(carol.claim("", "github")) // approved again: moves to the feed's end, a second upsert
	cp.Approve(newAgent("dave").claim("clm_dave", "slack"))
	if err := c.Refresh(ctx, "github"); err != nil {
		t.Fatal(err)
	}
	if changes, pages := feedRequests(cp, loaded); changes != 2 || pages != 0 { // 4 changes of github, 2 a page
		t.Fatalf("refresh made %d change requests and %d page requests, want 2 and 0", changes, pages)
	}
	if _, err := c.Lookup("github", "alice", alice.pub); !errors.Is(err, claimcache.ErrNotApproved) {
		t.Fatalf("revoked alice: %v", err)
	}
	if a, err := c.Lookup("github", "bob", bob.pub); err != nil || a.ClaimID != "clm_bob" {
		t.Fatalf("approved bob: %+v, %v", a, err)
	}
	if a, err := c.Lookup("github", "carol", carol.pub); err != nil || a.ClaimID != "clm_carol1" {
		t.Fatalf("carol: %+v, %v", a, err)
	}
	if st := c.Status("github"); st.Claims != 7 {
		t.Fatalf("status %+v, want 7 claims", st)
	}

	t.Run("expired cursor reads everything again", func(t *testing.T) {
		cp.Revoke("clm_bob")
		cp.ExpireChanges()
		before := len(cp.Requests())
		if err := c.Refresh(ctx, "github"); err != nil {
			t.Fatal(err)
		}
		// The changes (410), the full read's check for changes (410 too)
		// and the three pages of six claims.
		if changes, pages := feedRequests(cp, before); changes != 2 || pages != 3 {
			t.Fatalf("re-sync made %d change requests and %d page requests, want 2 and 3", changes, pages)
		}
		if _, err := c.Lookup("github", "bob", bob.pub); !errors.Is(err, claimcache.ErrNotApproved) {
			t.Fatalf("revoked bob after re-sync: %v", err)
		}
		if st := c.Status("github"); st.Claims != 6 {
			t.Fatalf("status %+v, want 6 claims", st)
		}
	})
}

// TestCacheChangesConvergeOnFullRead: after random approvals, re-approvals
// and revocations, a Cache that syncs changes holds exactly what one that
// reads every claim holds, tuple for tuple.
func TestCacheChangesConvergeOnFullRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cp := newControlPlane(t)
	src := &claimcache.HTTPSource{BaseURL: cp.URL, APIKey: keysOf(cp), PageSize: 3}
	incremental, full := newCache(t, src), newCache(t, fullSource{src})
	rng := rand.New(rand.NewPCG(1, 2))
	agents := make([]agent, 40)
	for i := range agents {
		agents[i] = newAgent(fmt.Sprintf("agent-%d", i))
	}
	var live []string
	for round := range 30 {
		for range rng.IntN(8) {
			switch a := agents[rng.IntN(len(agents))]; {
			case len(live) > 0 && rng.IntN(3) == 0:
				i := rng.IntN(len(live))
				cp.Revoke(live[i])
				live = append(live[:i], live[i+1:]...)
			default:
				live = append(live, cp.Approve(a.claim("", "github")).ID)
			}
		}
		for _, c := range []*claimcache.Cache{incremental, full} {
			if err := c.Refresh(ctx, "github"); err != nil {
				t.Fatal(err)
			}
		}
		if a, b := incremental.Status("github").Claims, full.Status("github").Claims; a != b {
			t.Fatalf("round %d: %d claims synced, %d read", round, a, b)
		}
		for _, a := range agents {
			x, errX := incremental.Lookup("github", a.namespace, a.pub)
			y, errY := full.Lookup("github", a.namespace, a.pub)
			if x != y || !errors.Is(errX, errY) && errX != errY {
				t.Fatalf("round %d, %s: synced %+v %v, read %+v %v", round, a.namespace, x, errX, y, errY)
			}
		}
	}
}

// TestClaimChangesRefusesBadAnswers: an answer for changes that could
// leave the snapshot wrong without anyone noticing is an error, never a
// partial application.
func TestClaimChangesRefusesBadAnswers(t *testing.T) {
	t.Parallel()
	upsert := `{"op":"upsert","claim_id":"clm_1","namespace":"alice","public_key":"ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","service":"github","approved_at":"2026-01-02T03:04:05Z"}`
	for _, tt := range []struct {
		name, body string
		status     int
		want       error
	}{
		{name: "cursor going back replays from an older state", body: `{"changes":[` + upsert + `],"cursor":"4","more":false}`},
		{name: "cursor moved without a change hides changes", body: `{"changes":[],"cursor":"9","more":false}`},
		{name: "more without a change loops forever", body: `{"changes":[],"cursor":"5","more":true}`},
		{name: "unknown op", body: `{"changes":[` + strings.Replace(upsert, "upsert", "grant", 1) + `],"cursor":"6","more":false}`},
		{name: "missing more", body: `{"changes":[],"cursor":"5"}`},
		{name: "cursor not a number", body: `{"changes":[],"cursor":"five","more":false}`},
		{name: "trailing data", body: `{"changes":[],"cursor":"5","more":false} {}`},
		{name: "gone is expired", status: http.StatusGone, body: `{"code":"FEED_CURSOR_EXPIRED"}`, want: claimcache.ErrVersionExpired},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("since") != "5" {
					t.Errorf("query %q", r.URL.RawQuery)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(cmp.Or(tt.status, http.StatusOK))
				io.WriteString(w, tt.body)
			}))
			t.Cleanup(cp.Close)
			src := &claimcache.HTTPSource{BaseURL: cp.URL, APIKey: func(string) (string, error) { return "idn_sk_k", nil }}
			applied := 0
			_, err := src.ClaimChanges(t.Context(), "github", "5", func(claimcache.Change) error { applied++; return nil })
			if err == nil || tt.want != nil && !errors.Is(err, tt.want) || tt.want == nil && errors.Is(err, claimcache.ErrVersionExpired) {
				t.Fatalf("err = %v", err)
			}
			if applied != 0 {
				t.Fatalf("%d changes applied from a bad answer", applied)
			}
		})
	}
}
