package claimcache_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/errcode"
)

type refreshEvent struct {
	service string
	claims  int
	err     error
}

func newTestCache(t *testing.T, cp *claimcachetest.Server, clk *fakeClock, cfg claimcache.Config) (*claimcache.Cache, chan refreshEvent) {
	t.Helper()
	events := make(chan refreshEvent, 100)
	cfg.Source = &claimcache.HTTPSource{BaseURL: cp.URL, APIKey: keysOf(cp), PageSize: 2}
	cfg.Clock = clk.Now
	cfg.OnRefresh = func(service string, claims int, err error) { events <- refreshEvent{service, claims, err} }
	if cfg.Services == nil {
		cfg.Services = []string{"github"}
	}
	c, err := claimcache.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, events
}

func TestLookupFreshnessFailsClosedAndRecovers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	alice, mallory := newAgent("alice"), newAgent("mallory")
	cp := newControlPlane(t, alice.claim("clm_alice", "github"))
	for i := range 4 {
		cp.Approve(newAgent(fmt.Sprintf("agent-%d", i)).claim(fmt.Sprintf("clm_%d", i), "github"))
	}
	clk := newFakeClock()
	c, _ := newTestCache(t, cp, clk, claimcache.Config{Options: claimcache.Options{TTL: 30 * time.Second, RefreshInterval: 10 * time.Second}})

	check := func(step string, a agent, want error) {
		t.Helper()
		got, err := c.Lookup("github", a.namespace, a.pub)
		if !errors.Is(err, want) || want == nil && err != nil {
			t.Fatalf("%s: Lookup(%s) = %v, want %v", step, a.namespace, err, want)
		}
		if want == nil && got.ClaimID != "clm_"+a.namespace {
			t.Fatalf("%s: claim id %q", step, got.ClaimID)
		}
	}
	check("never loaded", alice, claimcache.ErrUnavailable)

	if err := c.Refresh(ctx, "github"); err != nil {
		t.Fatal(err)
	}
	check("loaded", alice, nil)
	check("unapproved caller", mallory, claimcache.ErrNotApproved)
	if _, err := c.Lookup("github", mallory.namespace, alice.pub); !errors.Is(err, claimcache.ErrNotApproved) {
		t.Fatalf("approved key under another namespace: %v", err)
	}
	if _, err := c.Lookup("gitlab", alice.namespace, alice.pub); !errors.Is(err, claimcache.ErrLookupFailed) {
		t.Fatalf("untracked service: %v, want ErrLookupFailed", err)
	}
	if _, err := c.Lookup("github", alice.namespace, alice.pub[:31]); !errors.Is(err, claimcache.ErrLookupFailed) {
		t.Fatalf("truncated key: %v, want ErrLookupFailed", err)
	}

	// Feed unchanged: a 304 renews freshness.
	clk.Advance(20 * time.Second)
	if err := c.Refresh(ctx, "github"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(20 * time.Second) // 40 s after the full read, 20 s after the 304
	check("renewed by 304", alice, nil)

	// Feed down: the snapshot serves until its TTL runs out, then fails closed.
	cp.SetUnavailable(true)
	if err := c.Refresh(ctx, "github"); err == nil {
		t.Fatal("refresh against a down feed succeeded")
	}
	clk.Advance(9 * time.Second)
	check("feed down, within TTL", alice, nil)
	clk.Advance(time.Second)
	check("feed down, TTL over", alice, claimcache.ErrUnavailable)
	if st := c.Status("github"); !st.Loaded || st.Fresh || st.Claims != 5 {
		t.Fatalf("Status = %+v", st)
	}

	// Feed back: the next refresh recovers.
	cp.SetUnavailable(false)
	if err := c.Refresh(ctx, "github"); err != nil {
		t.Fatal(err)
	}
	check("feed back", alice, nil)
}

func TestSnapshotSkipsMalformedAndForeignRecords(t *testing.T) {
	t.Parallel()
	alice, bob, carol := newAgent("alice"), newAgent("bob"), newAgent("carol")
	bad := carol.claim("clm_carol", "github")
	bad.PublicKey = "ed25519:not-base64!"
	// A feed no control plane serves: a foreign service's claim, a bad key
	// and a duplicate tuple.
	claims := []claimcache.Claim{alice.claim("clm_alice", "github"), bob.claim("clm_bob", "gitlab"), bad,
		alice.claim("clm_alice_dup", "github")}
	feed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"claims": claims,
			"pagination": map[string]any{"limit": 2000, "offset": 0, "total": len(claims), "has_more": false}})
	}))
	defer feed.Close()
	c, err := claimcache.New(claimcache.Config{Services: []string{"github"},
		Source: &claimcache.HTTPSource{BaseURL: feed.URL, APIKey: func(string) (string, error) { return "idn_sk_k", nil }}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(context.Background(), "github"); err != nil {
		t.Fatal(err)
	}
	if a, err := c.Lookup("github", "alice", alice.pub); err != nil || a.ClaimID != "clm_alice" {
		t.Fatalf("alice: %+v, %v", a, err)
	}
	for _, a := range []agent{bob, carol} {
		if _, err := c.Lookup("github", a.namespace, a.pub); !errors.Is(err, claimcache.ErrNotApproved) {
			t.Errorf("%s: %v, want ErrNotApproved", a.namespace, err)
		}
	}
	if st := c.Status("github"); st.Claims != 1 || st.Skipped != 2 {
		t.Fatalf("Status = %+v, want 1 claim and 2 skipped", st)
	}
}

func TestEarlyRefreshIsSingleFlight(t *testing.T) {
	t.Parallel()
	alice := newAgent("alice")
	cp := newControlPlane(t, newAgent("bob").claim("clm_bob", "github"))
	clk := newFakeClock()
	// Polling: a held request for changes would bring the approval itself.
	c, events := newTestCache(t, cp, clk, claimcache.Config{Options: claimcache.Options{TTL: 2 * time.Hour, RefreshInterval: time.Hour, ChangeWait: -1}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	if ev := <-events; ev.err != nil || ev.claims != 1 {
		t.Fatalf("initial load: %+v", ev)
	}
	fetches := func() int { return len(cp.Requests()) }
	initial := fetches()

	// Alice is approved just now; her burst of requests all miss.
	cp.Approve(alice.claim("clm_alice", "github"))
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := c.Lookup("github", "alice", alice.pub); !errors.Is(err, claimcache.ErrNotApproved) && err != nil {
				t.Errorf("Lookup: %v", err)
			}
		})
	}
	wg.Wait()
	if ev := <-events; ev.err != nil || ev.claims != 2 {
		t.Fatalf("early refresh: %+v", ev)
	}
	if a, err := c.Lookup("github", "alice", alice.pub); err != nil || a.ClaimID != "clm_alice" {
		t.Fatalf("after early refresh: %+v, %v", a, err)
	}

	// Within the early-refresh interval (2 s) further misses fetch nothing.
	for range 50 {
		c.Lookup("github", "mallory", newAgent("mallory").pub)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if got := fetches() - initial; got != 1 { // one early read of one page
		t.Fatalf("%d feed requests after the misses, want 1 (one early refresh)", got)
	}
}

func TestRunPicksUpNewServicesAndStops(t *testing.T) {
	t.Parallel()
	alice := newAgent("alice")
	cp := newControlPlane(t, alice.claim("clm_alice", "gitlab"))
	c, events := newTestCache(t, cp, newFakeClock(), claimcache.Config{Services: []string{}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()

	c.SetServices("gitlab")
	if ev := <-events; ev.service != "gitlab" || ev.err != nil {
		t.Fatalf("refresh event %+v", ev)
	}
	if _, err := c.Lookup("gitlab", "alice", alice.pub); err != nil {
		t.Fatal(err)
	}
	c.SetServices()
	if _, err := c.Lookup("gitlab", "alice", alice.pub); !errors.Is(err, claimcache.ErrLookupFailed) {
		t.Fatalf("removed service: %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	src := &claimcache.HTTPSource{BaseURL: "http://cp.invalid", APIKey: func(string) (string, error) { return "idn_sk_k", nil }}
	tests := []struct {
		name string
		cfg  claimcache.Config
	}{
		{"nil source", claimcache.Config{}},
		{"TTL not above refresh interval", claimcache.Config{Source: src, Options: claimcache.Options{TTL: 10 * time.Second, RefreshInterval: 10 * time.Second}}},
		{"negative TTL", claimcache.Config{Source: src, Options: claimcache.Options{TTL: -time.Second}}},
		{"two change waits past the TTL", claimcache.Config{Source: src, Options: claimcache.Options{TTL: 30 * time.Second, ChangeWait: 15 * time.Second}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := claimcache.New(tt.cfg); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestSentinelsArePlain: the cache's errors carry no code; the gateway's
// proxy, the HTTP edge, maps them.
func TestSentinelsArePlain(t *testing.T) {
	t.Parallel()
	for _, err := range []error{claimcache.ErrUnavailable, claimcache.ErrNotApproved, claimcache.ErrRateLimited,
		claimcache.ErrLookupFailed, claimcache.ErrNotModified, claimcache.ErrFeedChanged, claimcache.ErrVersionExpired} {
		if code, ok := errcode.Of(err); ok {
			t.Errorf("%v carries %s", err, code)
		}
	}
}

func TestRunRecoversWhenTheFeedComesBack(t *testing.T) {
	t.Parallel()
	alice := newAgent("alice")
	cp := newControlPlane(t, alice.claim("clm_alice", "github"))
	clk := newFakeClock()
	// Polling only: the fake clock ends the lease at once, which a held
	// change request (renewing it on the real clock) never lets happen,
	// and the request would answer only at the end of its wait.
	c, events := newTestCache(t, cp, clk, claimcache.Config{Options: claimcache.Options{TTL: 2 * time.Hour, RefreshInterval: time.Hour,
		EarlyRefreshInterval: 10 * time.Millisecond, ChangeWait: -1}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	if ev := <-events; ev.err != nil {
		t.Fatalf("initial load: %v", ev.err)
	}

	cp.SetUnavailable(true)
	clk.Advance(2 * time.Hour)
	if _, err := c.Lookup("github", "alice", alice.pub); !errors.Is(err, claimcache.ErrUnavailable) {
		t.Fatalf("feed down past TTL: %v", err)
	}
	if ev := <-events; ev.err == nil { // the early refresh the lookup asked for
		t.Fatal("refresh against a down feed succeeded")
	}

	cp.SetUnavailable(false)
	if _, err := c.Lookup("github", "alice", alice.pub); !errors.Is(err, claimcache.ErrUnavailable) {
		t.Fatalf("before the next refresh: %v", err)
	}
	// Lookups go on asking, one early refresh per EarlyRefreshInterval.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		a, err := c.Lookup("github", "alice", alice.pub)
		if err == nil && a.ClaimID == "clm_alice" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not recovered: %+v, %v", a, err)
		}
	}
}

// Without an injected clock lookups read no time: a timer ends the lease a
// TTL after the last good refresh began, and every good refresh renews it.
func TestLeaseRunsOnTheSystemClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	alice := newAgent("alice")
	cp := newControlPlane(t, alice.claim("clm_alice", "github"))
	const ttl = time.Second
	c, err := claimcache.New(claimcache.Config{
		Source: &claimcache.HTTPSource{BaseURL: cp.URL, APIKey: keysOf(cp)},
		Options: claimcache.Options{
			TTL:                  ttl,
			RefreshInterval:      ttl / 2,
			EarlyRefreshInterval: -1,
		},
		Services: []string{"github"},
	})
	if err != nil {
		t.Fatal(err)
	}
	lookup := func() error { _, err := c.Lookup("github", "alice", alice.pub); return err }
	refresh := func() time.Time {
		t.Helper()
		began := time.Now()
		if err := c.Refresh(ctx, "github"); err != nil {
			t.Fatal(err)
		}
		return began
	}
	// fresh checks a lookup made before the lease can have ended.
	fresh := func(step string, since time.Time) {
		t.Helper()
		err := lookup()
		if time.Since(since) < ttl && err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}

	// The sleeps are the passage of system time under test: no clock to
	// advance, and nothing to await before the lease is due to end.
	fresh("loaded", refresh())
	time.Sleep(ttl / 2)
	renewed := refresh() // the feed is unchanged: a 304 renews the lease
	time.Sleep(ttl/2 + ttl/4)
	fresh("renewed", renewed)

	for deadline := time.Now().Add(10 * time.Second); lookup() == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the lease never ended")
		}
	}
	if waited := time.Since(renewed); waited < ttl {
		t.Fatalf("the lease ended %v after the renewal, before the TTL of %v", waited, ttl)
	}
	if err := lookup(); !errors.Is(err, claimcache.ErrUnavailable) {
		t.Fatalf("after the lease: %v", err)
	}
	if st := c.Status("github"); !st.Loaded || st.Fresh {
		t.Fatalf("Status after the lease = %+v", st)
	}
	fresh("reloaded", refresh())
}

// TestRunFollowsChanges: from a control plane that holds requests for
// changes, Run keeps one waiting, so an approval, a revocation and a
// rejection reach the cache without a lookup asking and without a poll,
// each for one request.
func TestRunFollowsChanges(t *testing.T) {
	t.Parallel()
	alice := newAgent("alice")
	cp := newControlPlane(t, newAgent("bob").claim("clm_bob", "github"))
	c, events := newTestCache(t, cp, newFakeClock(), claimcache.Config{Options: claimcache.Options{TTL: 2 * time.Hour, RefreshInterval: time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	if ev := <-events; ev.err != nil || ev.claims != 1 {
		t.Fatalf("initial load: %+v", ev)
	}
	held := func() int {
		n := 0
		for _, r := range cp.Requests() {
			if r.URL.Query().Has("wait") {
				n++
			}
		}
		return n
	}

	cp.Approve(alice.claim("clm_alice", "github"))
	if ev := <-events; ev.err != nil || ev.claims != 2 {
		t.Fatalf("after the approval: %+v", ev)
	}
	if a, err := c.Lookup("github", "alice", alice.pub); err != nil || a.ClaimID != "clm_alice" {
		t.Fatalf("approved: %+v, %v", a, err)
	}
	cp.Revoke("clm_alice")
	if ev := <-events; ev.err != nil || ev.claims != 1 {
		t.Fatalf("after the revocation: %+v", ev)
	}
	// The revocation is told apart from a caller never approved.
	_, err := c.Lookup("github", "alice", alice.pub)
	if re, ok := errors.AsType[*claimcache.RevokedError](err); !ok || re.ClaimID != "clm_alice" ||
		!errors.Is(err, claimcache.ErrNotApproved) || !errors.Is(err, claimcache.ErrRevoked) {
		t.Fatalf("revoked: %v", err)
	}
	if _, err := c.Lookup("github", "mallory", newAgent("mallory").pub); err != claimcache.ErrNotApproved {
		t.Fatalf("never approved: %v", err)
	}
	// A rejection changes no approved claim, yet reaches the cache too.
	carol := newAgent("carol")
	filed, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{BaseURL: cp.URL,
		APIKey: func(string) (string, error) { return cp.APIKey("github"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	receipt, err := filed.Submit(ctx, claimcache.Submission{ConnectionID: "github", Namespace: "carol", PublicKey: carol.header(), Service: "github"})
	if err != nil || !cp.Reject(receipt.ClaimID) {
		t.Fatalf("submit %+v, %v", receipt, err)
	}
	if ev := <-events; ev.err != nil || ev.claims != 1 {
		t.Fatalf("after the rejection: %+v", ev)
	}
	_, err = c.Lookup("github", "carol", carol.pub)
	if re, ok := errors.AsType[*claimcache.RejectedError](err); !ok || re.ClaimID != receipt.ClaimID ||
		!errors.Is(err, claimcache.ErrNotApproved) || !errors.Is(err, claimcache.ErrRejected) || errors.Is(err, claimcache.ErrRevoked) {
		t.Fatalf("rejected: %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	// One held request brought each change (and a third may have been
	// waiting): nothing else was asked after the full read.
	if n, all := held(), len(cp.Requests())-1; n < 3 || all-n != 1 {
		t.Fatalf("%d held requests of %d, want a full read and three or four waits", n, all)
	}
}

// TestRunPollsWhenRequestsAreNotHeld: a control plane that answers a
// request for changes at once (one that does not know wait=) is polled
// every RefreshInterval instead, and changes still arrive.
func TestRunPollsWhenRequestsAreNotHeld(t *testing.T) {
	t.Parallel()
	alice := newAgent("alice")
	cp := newControlPlane(t)
	var requests atomic.Int64
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		q := r.URL.Query()
		q.Del("wait")
		r.URL.RawQuery = q.Encode()
		r.RequestURI = r.URL.RequestURI()
		proxied, _ := http.NewRequestWithContext(r.Context(), r.Method, cp.URL+r.URL.RequestURI(), r.Body)
		proxied.Header = r.Header
		resp, err := http.DefaultClient.Do(proxied)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		maps.Copy(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(old.Close)
	events := make(chan refreshEvent, 100)
	c, err := claimcache.New(claimcache.Config{
		Source:    &claimcache.HTTPSource{BaseURL: old.URL, APIKey: keysOf(cp)},
		Services:  []string{"github"},
		Options:   claimcache.Options{TTL: time.Minute, RefreshInterval: 50 * time.Millisecond, ChangeWait: 10 * time.Second},
		OnRefresh: func(service string, claims int, err error) { events <- refreshEvent{service, claims, err} },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	began := time.Now()
	go func() { done <- c.Run(ctx) }()
	if ev := <-events; ev.err != nil || ev.claims != 0 {
		t.Fatalf("initial load: %+v", ev)
	}
	cp.Approve(alice.claim("clm_alice", "github"))
	for ev := range events {
		if ev.err != nil {
			t.Fatal(ev.err)
		}
		if ev.claims == 1 {
			break
		}
	}
	cancel()
	<-done
	// About one request per RefreshInterval, never one after another at
	// once: an answer that was not held is not asked again until the
	// next poll.
	if n, most := requests.Load(), 2*int64(time.Since(began)/(50*time.Millisecond))+4; n > most {
		t.Fatalf("%d requests in %v, want at most %d", n, time.Since(began), most)
	}
}
