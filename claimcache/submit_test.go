package claimcache_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
)

func TestSubmitterRateLimit(t *testing.T) {
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
		{"negative limit disables it", -1, []step{
			{0, "github", "alice", nil}, {0, "github", "alice", nil}, {0, "github", "alice", nil},
			{0, "github", "alice", nil}, {0, "github", "alice", nil}, {0, "github", "alice", nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := newFakeControlPlane(t, "github")
			clk := newFakeClock()
			s, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{
				BaseURL: cp.srv.URL, APIKey: keyFor, RatePerMinute: tt.perMinute, Clock: clk.Now,
			})
			if err != nil {
				t.Fatal(err)
			}
			sent := 0
			for i, st := range tt.steps {
				clk.Advance(st.advance)
				a := newAgent(st.namespace)
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
			if got := cp.submissionCount(); got != sent {
				t.Fatalf("control plane saw %d submissions, want %d (refused ones must not be sent)", got, sent)
			}
		})
	}
}

func TestSubmitterAnswers(t *testing.T) {
	cp := newFakeControlPlane(t, "github")
	s, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{BaseURL: cp.srv.URL, APIKey: keyFor})
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
	cp.mu.Lock()
	body := cp.submissions[0]
	cp.mu.Unlock()
	want := map[string]string{"namespace": "alice", "public_key": alice.header(), "service": "github",
		"agent_ip": "203.0.113.7", "subject": "ci-bot", "nonce": "n0nce-123"}
	if fmt.Sprint(body) != fmt.Sprint(want) {
		t.Fatalf("body %v, want %v", body, want)
	}
}

func TestSubmitterErrors(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		handler http.HandlerFunc
		status  int
	}{
		{name: "wrong key is reported without echoing it", key: "idn_sk_wrong-key", status: http.StatusUnauthorized},
		{name: "pending limit reached", key: testKey, status: http.StatusTooManyRequests,
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeError(w, http.StatusTooManyRequests, "PENDING_LIMIT_REACHED", "too many for "+r.Header.Get("Authorization"))
			}},
		{name: "answer without claim id", key: testKey,
			handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated); w.Write([]byte(`{}`)) }},
		{name: "answer not JSON", key: testKey,
			handler: func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`<html>`)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := newFakeControlPlane(t, "github")
			if tt.handler != nil {
				cp.srv.Config.Handler = tt.handler
			}
			s, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{
				BaseURL: cp.srv.URL, APIKey: func(string) (string, error) { return tt.key, nil },
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
