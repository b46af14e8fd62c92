package claimcache_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
)

func TestSubmitterRateLimit(t *testing.T) {
	t.Parallel()
	type step struct {
		advance    time.Duration
		connection string
		namespace  string
		want       error
	}
	tests := []struct {
		name      string
		perMinute int
		steps     []step
	}{
		{"burst up to the limit passes, the next is refused", 2, []step{
			{0, "github", "alice", nil},
			{0, "github", "alice", nil},
			{0, "github", "alice", claimcache.ErrRateLimited},
		}},
		{"limit is per namespace: a flood from one does not block another", 1, []step{
			{0, "github", "mallory", nil},
			{0, "github", "mallory", claimcache.ErrRateLimited},
			{0, "github", "alice", nil},
		}},
		{"limit is per connection", 1, []step{
			{0, "github", "alice", nil},
			{0, "github-enterprise", "alice", nil},
			{0, "github", "alice", claimcache.ErrRateLimited},
		}},
		{"a token returns after a minute / limit", 2, []step{
			{0, "github", "alice", nil},
			{0, "github", "alice", nil},
			{29 * time.Second, "github", "alice", claimcache.ErrRateLimited},
			{time.Second, "github", "alice", nil},
		}},
		{"zero limit means DefaultSubmitRatePerMinute", 0, append(
			slices.Repeat([]step{{0, "github", "alice", nil}}, claimcache.DefaultSubmitRatePerMinute),
			step{0, "github", "alice", claimcache.ErrRateLimited})},
		{"negative limit disables it", -1, []step{
			{0, "github", "alice", nil}, {0, "github", "alice", nil}, {0, "github", "alice", nil},
			{0, "github", "alice", nil}, {0, "github", "alice", nil}, {0, "github", "alice", nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cp := newControlPlane(t)
			clk := newFakeClock()
			s, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{
				BaseURL: cp.URL, APIKey: githubKey(cp), Clock: clk.Now,
				SubmitterOptions: claimcache.SubmitterOptions{RatePerMinute: tt.perMinute},
			})
			if err != nil {
				t.Fatal(err)
			}
			sent := 0
			for i, st := range tt.steps {
				clk.Advance(st.advance)
				// A new key per step: a repeated tuple would be answered
				// from memory, not limited.
				a := agent{st.namespace, newAgent(fmt.Sprint(st.namespace, i)).pub}
				_, err := s.Submit(context.Background(), claimcache.Submission{
					ConnectionID: st.connection, Namespace: a.namespace, PublicKey: a.header(), Service: "github",
				})
				if st.want == nil && err != nil || !errors.Is(err, st.want) {
					t.Fatalf("step %d: Submit = %v, want %v", i, err, st.want)
				}
				if err == nil {
					sent++
				}
			}
			if got := len(cp.Submissions()); got != sent {
				t.Fatalf("control plane saw %d submissions, want %d (refused ones must not be sent)", got, sent)
			}
		})
	}
}

func TestSubmitterAnswers(t *testing.T) {
	t.Parallel()
	cp := newControlPlane(t)
	s, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{BaseURL: cp.URL, APIKey: githubKey(cp)})
	if err != nil {
		t.Fatal(err)
	}
	alice := newAgent("alice")
	sub := claimcache.Submission{
		ConnectionID: "github", Namespace: "alice", PublicKey: alice.header(), Service: "github",
		AgentIP: "203.0.113.7", Subject: "ci-bot", Nonce: "n0nce-123",
	}
	first, err := s.Submit(context.Background(), sub)
	if err != nil || !first.Created || first.ClaimID == "" || first.Status != "pending" {
		t.Fatalf("first submission: %+v, %v", first, err)
	}
	again, err := s.Submit(context.Background(), sub)
	if err != nil || again.Created || again.ClaimID != first.ClaimID {
		t.Fatalf("repeated submission: %+v, %v", again, err)
	}
	// The server refuses unknown fields, so these are all the body held.
	want := claimcachetest.Submission{ClaimID: first.ClaimID, Created: true, Namespace: "alice", PublicKey: alice.header(),
		Service: "github", AgentIP: "203.0.113.7", Subject: "ci-bot", Nonce: "n0nce-123"}
	if subs := cp.Submissions(); len(subs) != 1 || subs[0] != want {
		t.Fatalf("submissions %+v, want one %+v", subs, want)
	}
}

func TestSubmitterErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		key     string
		handler http.HandlerFunc
		status  int
	}{
		{name: "wrong key is reported without echoing it", key: "idn_sk_wrong-key", status: http.StatusUnauthorized},
		{name: "pending limit reached", status: http.StatusTooManyRequests,
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeError(w, http.StatusTooManyRequests, "PENDING_LIMIT_REACHED", "too many for "+r.Header.Get("Authorization"))
			}},
		{name: "answer without claim id",
			handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated); w.Write([]byte(`{}`)) }},
		{name: "answer not JSON",
			handler: func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`<html>`)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cp := newControlPlane(t)
			url, key := cp.URL, tt.key
			if tt.handler != nil {
				srv := httptest.NewServer(tt.handler)
				defer srv.Close()
				url, key = srv.URL, cp.APIKey("github")
			}
			s, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{
				BaseURL: url, APIKey: func(string) (string, error) { return key, nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			a := newAgent("alice")
			_, err = s.Submit(context.Background(), claimcache.Submission{
				ConnectionID: "github", Namespace: "alice", PublicKey: a.header(), Service: "github",
			})
			if err == nil {
				t.Fatal("no error")
			}
			var se *claimcache.StatusError
			if tt.status != 0 && (!errors.As(err, &se) || se.StatusCode != tt.status) {
				t.Errorf("err = %v, want status %d", err, tt.status)
			}
			if strings.Contains(err.Error(), "idn_sk_") {
				t.Errorf("error leaks a key: %v", err)
			}
		})
	}
}

// An agent that polls while it waits for approval keeps getting its claim
// id from the submitter's memory: no call to the control plane, no rate
// limit spent. The memory is bounded in age and entries.
func TestSubmitterRemembersReceipts(t *testing.T) {
	t.Parallel()
	type step struct {
		advance    time.Duration
		connection string
		agent      string // namespace/key-seed
		wantClaim  string // "" with wantErr
		wantErr    error
		wantSent   int // control-plane submissions so far
	}
	tests := []struct {
		name        string
		perMinute   int
		ttl         time.Duration
		maxReceipts int
		fail        bool // the control plane answers 503
		steps       []step
	}{
		{name: "polling agent past the rate limit keeps its claim id", perMinute: 1, steps: []step{
			{0, "github", "alice/1", "clm_001", nil, 1},
			{time.Second, "github", "alice/1", "clm_001", nil, 1},
			{time.Second, "github", "alice/1", "clm_001", nil, 1},
		}},
		{name: "remembered answers spend no rate limit", perMinute: 2, steps: []step{
			{0, "github", "alice/1", "clm_001", nil, 1},
			{0, "github", "alice/1", "clm_001", nil, 1},
			{0, "github", "alice/1", "clm_001", nil, 1},
			{0, "github", "alice/2", "clm_002", nil, 2},
			{0, "github", "alice/3", "", claimcache.ErrRateLimited, 2},
		}},
		{name: "self-made keys in one namespace are still limited", perMinute: 1, steps: []step{
			{0, "github", "mallory/1", "clm_001", nil, 1},
			{0, "github", "mallory/2", "", claimcache.ErrRateLimited, 1},
			{0, "github", "mallory/3", "", claimcache.ErrRateLimited, 1},
		}},
		{name: "memory ages out and the control plane answers the same claim", perMinute: 10, ttl: time.Minute, steps: []step{
			{0, "github", "alice/1", "clm_001", nil, 1},
			{59 * time.Second, "github", "alice/1", "clm_001", nil, 1},
			{time.Second, "github", "alice/1", "clm_001", nil, 2},
		}},
		{name: "oldest receipt is forgotten past the entry bound", perMinute: 10, maxReceipts: 2, steps: []step{
			{0, "github", "alice/1", "clm_001", nil, 1},
			{0, "github", "bob/1", "clm_002", nil, 2},
			{0, "github", "carol/1", "clm_003", nil, 3},
			{0, "github", "carol/1", "clm_003", nil, 3},
			{0, "github", "alice/1", "clm_001", nil, 4},
		}},
		{name: "another connection is another tuple", perMinute: 10, steps: []step{
			{0, "github", "alice/1", "clm_001", nil, 1},
			{0, "github-enterprise", "alice/1", "clm_001", nil, 2},
		}},
		{name: "negative TTL remembers nothing", perMinute: 1, ttl: -1, steps: []step{
			{0, "github", "alice/1", "clm_001", nil, 1},
			{0, "github", "alice/1", "", claimcache.ErrRateLimited, 1},
		}},
		{name: "a failed submission is not remembered", perMinute: 10, fail: true, steps: []step{
			{0, "github", "alice/1", "", errSubmitFailed, 1},
			{0, "github", "alice/1", "", errSubmitFailed, 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cp := newControlPlane(t)
			cp.SetUnavailable(tt.fail)
			clk := newFakeClock()
			s, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{
				SubmitterOptions: claimcache.SubmitterOptions{
					RatePerMinute: tt.perMinute,
					ReceiptTTL:    tt.ttl,
					MaxReceipts:   tt.maxReceipts,
				},
				BaseURL: cp.URL, APIKey: githubKey(cp), Clock: clk.Now,
			})
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tt.steps {
				clk.Advance(st.advance)
				ns, _, _ := strings.Cut(st.agent, "/")
				a := agent{ns, newAgent(st.agent).pub}
				rc, err := s.Submit(context.Background(), claimcache.Submission{
					ConnectionID: st.connection, Namespace: a.namespace, PublicKey: a.header(), Service: "github",
				})
				switch {
				case st.wantErr == errSubmitFailed:
					var se *claimcache.StatusError
					if !errors.As(err, &se) {
						t.Fatalf("step %d: Submit = %v, want the control plane's failure", i, err)
					}
				case st.wantErr != nil:
					if !errors.Is(err, st.wantErr) {
						t.Fatalf("step %d: Submit = %+v, %v, want %v", i, rc, err, st.wantErr)
					}
				case err != nil || rc.ClaimID != st.wantClaim || rc.Status != "pending":
					t.Fatalf("step %d: Submit = %+v, %v, want %s pending", i, rc, err, st.wantClaim)
				}
				if got := len(cp.Requests()); got != st.wantSent {
					t.Fatalf("step %d: control plane saw %d submissions, want %d", i, got, st.wantSent)
				}
			}
		})
	}
}

// errSubmitFailed marks a step whose submission reaches a failing control
// plane.
var errSubmitFailed = errors.New("control plane failed")

// Requests an agent fires at once before its first submission is answered
// share that one submission: one call, one rate-limit token, one claim id.
func TestSubmitterConcurrentRepeatsShareOneSubmission(t *testing.T) {
	t.Parallel()
	cp := newControlPlane(t)
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		cp.ServeHTTP(w, r)
	}))
	defer front.Close()
	s, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{BaseURL: front.URL, APIKey: githubKey(cp), SubmitterOptions: claimcache.SubmitterOptions{RatePerMinute: 1}})
	if err != nil {
		t.Fatal(err)
	}
	a := newAgent("alice")
	sub := claimcache.Submission{ConnectionID: "github", Namespace: "alice", PublicKey: a.header(), Service: "github"}
	const n = 20
	type result struct {
		rc  claimcache.Receipt
		err error
	}
	results := make(chan result, n)
	go func() { rc, err := s.Submit(context.Background(), sub); results <- result{rc, err} }()
	<-arrived // the first submission is at the control plane
	var followers sync.WaitGroup
	for range n - 1 {
		followers.Go(func() { rc, err := s.Submit(context.Background(), sub); results <- result{rc, err} })
	}
	close(release)
	followers.Wait()
	for range n {
		r := <-results
		if r.err != nil || r.rc.ClaimID != "clm_001" {
			t.Fatalf("Submit = %+v, %v", r.rc, r.err)
		}
	}
	if got := len(cp.Submissions()); got != 1 {
		t.Fatalf("control plane saw %d submissions, want 1", got)
	}
}
