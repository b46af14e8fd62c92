package claimcache_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
)

func ExampleCache() {
	seed := sha256.Sum256([]byte("example agent"))
	agentKey := ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)

	// A stand-in for the control plane's approved-claims feed.
	controlPlane := claimcachetest.NewServer()
	defer controlPlane.Close()
	controlPlane.Approve(claimcache.Claim{ID: "clm_7Hq2", Namespace: "alice", Service: "github",
		PublicKey: "ed25519:" + base64.StdEncoding.EncodeToString(agentKey)})

	cache, err := claimcache.New(claimcache.Config{
		Source: &claimcache.HTTPSource{
			BaseURL: controlPlane.URL,
			APIKey:  func(service string) (string, error) { return controlPlane.APIKey(service), nil },
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
	fmt.Println(errors.Is(err, claimcache.ErrNotApproved))
	// Output:
	// clm_7Hq2 <nil>
	// true
}

func ExampleSubmitter() {
	controlPlane := claimcachetest.NewServer()
	defer controlPlane.Close()

	submitter, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{
		BaseURL: controlPlane.URL,
		// The connection "github" is for the service "github".
		APIKey:           func(connectionID string) (string, error) { return controlPlane.APIKey("github"), nil },
		SubmitterOptions: claimcache.SubmitterOptions{RatePerMinute: 1},
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
	fmt.Println(errors.Is(err, claimcache.ErrRateLimited))
	// Output:
	// clm_001 pending true <nil>
	// clm_001 pending false <nil>
	// true
}

func ExampleHTTPSource_ClaimChanges() {
	controlPlane := claimcachetest.NewServer()
	defer controlPlane.Close()
	controlPlane.Approve(claimcache.Claim{ID: "clm_1", Namespace: "alice", Service: "github",
		PublicKey: "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="})
	src := &claimcache.HTTPSource{
		BaseURL: controlPlane.URL,
		APIKey:  func(service string) (string, error) { return controlPlane.APIKey(service), nil },
	}
	ctx := context.Background()
	// One full read, whose version is the feed's cursor.
	version, err := src.ApprovedClaims(ctx, "github", "", func(c claimcache.Claim) error {
		fmt.Println("claim", c.ID)
		return nil
	})
	if err != nil {
		panic(err)
	}
	controlPlane.Approve(claimcache.Claim{ID: "clm_2", Namespace: "bob", Service: "github",
		PublicKey: "ed25519:A3vUMWqxTyp3nd0ELXhOQa8SYKzk5+6gRhHq4uUJM14="})
	controlPlane.Revoke("clm_1")
	// Then only what changed since.
	_, err = src.ClaimChanges(ctx, "github", version, func(c claimcache.Change) error {
		fmt.Println("delete", c.Delete, c.ID)
		return nil
	})
	fmt.Println(err)
	// Once the control plane no longer has those changes, read everything again.
	controlPlane.ExpireChanges()
	_, err = src.ClaimChanges(ctx, "github", version, func(claimcache.Change) error { return nil })
	fmt.Println(errors.Is(err, claimcache.ErrVersionExpired))
	// Output:
	// claim clm_1
	// delete false clm_2
	// delete true clm_1
	// <nil>
	// true
}
