package claimcache_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/errcode"
)

func ExampleCache() {
	seed := sha256.Sum256([]byte("example agent"))
	agentKey := ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)

	// A stand-in for the control plane's approved-claims feed.
	controlPlane := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{
			"claims": []claimcache.Claim{{
				ID: "clm_7Hq2", Namespace: "alice", Service: "github",
				PublicKey:  "ed25519:" + base64.StdEncoding.EncodeToString(agentKey),
				ApprovedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
			}},
			"pagination": map[string]any{"limit": 2000, "offset": 0, "total": 1, "has_more": false},
		})
	}))
	defer controlPlane.Close()

	cache, err := claimcache.New(claimcache.Config{
		Source: &claimcache.HTTPSource{
			BaseURL: controlPlane.URL,
			APIKey:  func(service string) (string, error) { return "idn_sk_example", nil },
		},
		Services: []string{"github"},
	})
	if err != nil {
		panic(err)
	}
	// A gateway runs cache.Run(ctx) in the background; here one refresh will do.
	if err := cache.Refresh(context.Background(), "github"); err != nil {
		panic(err)
	}

	approval, err := cache.Lookup("github", "alice", agentKey)
	fmt.Println(approval.ClaimID, err)
	_, err = cache.Lookup("github", "mallory", agentKey)
	code, _ := errcode.Of(err)
	fmt.Println(errors.Is(err, claimcache.ErrNotApproved), code)
	// Output:
	// clm_7Hq2 <nil>
	// true AUTH_CLAIM_REQUIRED
}

func ExampleSubmitter() {
	controlPlane := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"claim_id":"clm_9Zx1","status":"pending"}`)
	}))
	defer controlPlane.Close()

	submitter, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{
		BaseURL:       controlPlane.URL,
		APIKey:        func(connectionID string) (string, error) { return "idn_sk_example", nil },
		RatePerMinute: 1,
	})
	if err != nil {
		panic(err)
	}
	sub := claimcache.Submission{
		ConnectionID: "github", Namespace: "alice", Service: "github",
		PublicKey: "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=", AgentIP: "203.0.113.7",
	}
	receipt, err := submitter.Submit(context.Background(), sub)
	fmt.Println(receipt.ClaimID, receipt.Status, receipt.Created, err)
	// The agent polls: its repeat is answered from memory.
	receipt, err = submitter.Submit(context.Background(), sub)
	fmt.Println(receipt.ClaimID, receipt.Status, receipt.Created, err)
	// Another key of the namespace is a new submission, over the limit.
	sub.PublicKey = "ed25519:A3vUMWqxTyp3nd0ELXhOQa8SYKzk5+6gRhHq4uUJM14="
	_, err = submitter.Submit(context.Background(), sub)
	code, _ := errcode.Of(err)
	fmt.Println(code, code.Status())
	// Output:
	// clm_9Zx1 pending true <nil>
	// clm_9Zx1 pending false <nil>
	// AUTH_CLAIM_SUBMIT_RATE_LIMITED 429
}
