package approval_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/approval/approvaltest"
)

// A payment held until its owner approves it with a passkey: the first
// call files a request, the owner signs its challenge, and the same call
// then passes once.
func ExampleGate() {
	owner := approvaltest.NewPasskey("idn.example", "https://idn.example")
	keys := approvaltest.Keys("acme", owner)
	d := &desk{statuses: map[string]approval.Status{}} // the control plane
	gate, err := approval.New(approval.Config{Gateway: "ed25519:gateway-key", Desk: d, Keys: func() *approval.Keys { return keys }})
	if err != nil {
		fmt.Println(err)
		return
	}
	rules := approval.Rules{Routes: []string{"POST /v1/payments"}}
	call := &approval.Call{Connection: "bank", Namespace: "agents", PublicKey: "ed25519:agent-key", Subject: "finance",
		Method: "POST", Path: "/v1/payments", Arguments: []byte(`{"to":"bob","amount":"12.50"}`)}
	fmt.Println(rules.MatchRoute(call.Method, call.Path))

	err = gate.Admit(context.Background(), call)
	var held *approval.RequiredError
	fmt.Println(errors.As(err, &held))

	// The owner approves in the dashboard: a WebAuthn assertion over the
	// request's challenge, which the gateway checks itself.
	req := d.filed[0]
	g := approval.Grant{ActionID: req.ID, Gateway: req.Gateway, Digest: req.Digest, ExpiresAt: req.ExpiresAt, Uses: 1}
	d.set(req.ID, approval.Status{State: "approved", Uses: 1, Assertion: owner.Assert(approval.Challenge(g), approvaltest.Flags)})

	fmt.Println(gate.Admit(context.Background(), call))
	fmt.Println(errors.As(gate.Admit(context.Background(), call), &held))
	// Output:
	// true
	// true
	// <nil>
	// true
}

// Two Gates sharing one Store, as replicas of a fleet share PostgreSQL's:
// a call held by one and approved once passes on the other, once.
func ExampleMemoryStore() {
	owner := approvaltest.NewPasskey("idn.example", "https://idn.example")
	keys := approvaltest.Keys("acme", owner)
	d := &desk{statuses: map[string]approval.Status{}}
	shared := &approval.MemoryStore{}
	var replicas []*approval.Gate
	for range 2 {
		g, err := approval.New(approval.Config{Gateway: "ed25519:fleet-key", Desk: d, Keys: func() *approval.Keys { return keys }, Store: shared})
		if err != nil {
			fmt.Println(err)
			return
		}
		replicas = append(replicas, g)
	}
	call := &approval.Call{Connection: "bank", Namespace: "agents", PublicKey: "ed25519:agent-key",
		Method: "POST", Path: "/v1/payments", Arguments: []byte(`{"to":"bob","amount":"12.50"}`)}
	var held *approval.RequiredError
	fmt.Println(errors.As(replicas[0].Admit(context.Background(), call), &held))

	req := d.filed[0]
	g := approval.Grant{ActionID: req.ID, Gateway: req.Gateway, Digest: req.Digest, ExpiresAt: req.ExpiresAt, Uses: 1}
	d.set(req.ID, approval.Status{State: "approved", Uses: 1, Assertion: owner.Assert(approval.Challenge(g), approvaltest.Flags)})

	fmt.Println(replicas[1].Admit(context.Background(), call))
	fmt.Println(errors.As(replicas[0].Admit(context.Background(), call), &held))
	// Output:
	// true
	// <nil>
	// true
}
