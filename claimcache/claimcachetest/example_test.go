package claimcachetest_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/identity"
)

// A cache reads the server's feed; a revocation leaves it on the next
// refresh.
func ExampleServer() {
	seed := sha256.Sum256([]byte("example agent"))
	agentKey := ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)

	cp := claimcachetest.NewServer()
	defer cp.Close()
	approved := cp.Approve(claimcache.Claim{ID: "clm_1", Namespace: "alice", Service: "weather",
		PublicKey: identity.FormatPublicKey(agentKey)})

	cache, err := claimcache.New(claimcache.Config{
		Source: &claimcache.HTTPSource{BaseURL: cp.URL,
			APIKey: func(service string) (string, error) { return cp.APIKey(service), nil }},
		Services: []string{"weather"},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := cache.Refresh(ctx, "weather"); err != nil {
		panic(err)
	}
	a, err := cache.Lookup("weather", "alice", agentKey)
	fmt.Println(a.ClaimID, err)

	cp.Revoke(approved.ID)
	if err := cache.Refresh(ctx, "weather"); err != nil {
		panic(err)
	}
	_, err = cache.Lookup("weather", "alice", agentKey)
	fmt.Println(errors.Is(err, claimcache.ErrNotApproved))
	// Output:
	// clm_1 <nil>
	// true
}

// A submitted claim waits, pending, until the test approves its tuple; then
// the feed serves it under the id the submission got.
func ExampleServer_Submissions() {
	seed := sha256.Sum256([]byte("example agent"))
	agentKey := identity.FormatPublicKey(ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey))

	cp := claimcachetest.NewServer()
	defer cp.Close()
	submitter, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{BaseURL: cp.URL,
		APIKey: func(string) (string, error) { return cp.APIKey("weather"), nil }})
	if err != nil {
		panic(err)
	}
	receipt, err := submitter.Submit(context.Background(), claimcache.Submission{
		ConnectionID: "weather", Namespace: "alice", PublicKey: agentKey, Service: "weather"})
	fmt.Println(receipt.Status, receipt.Created, err)

	sub := cp.Submissions()[0]
	approved := cp.Approve(claimcache.Claim{Namespace: sub.Namespace, PublicKey: sub.PublicKey, Service: sub.Service})
	fmt.Println(approved.ID == receipt.ClaimID)
	// Output:
	// pending true <nil>
	// true
}
