package approval_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/approval/approvaltest"
)

// desk is a control plane in memory: it records requests and answers the
// status a test sets, which may be a lie.
type desk struct {
	mu       sync.Mutex
	filed    []approval.Request
	statuses map[string]approval.Status
}

func (d *desk) File(_ context.Context, r approval.Request) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.filed = append(d.filed, r)
	return nil
}

func (d *desk) Status(_ context.Context, id string) (approval.Status, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st, ok := d.statuses[id]; ok {
		return st, nil
	}
	return approval.Status{State: "pending"}, nil
}

func (d *desk) set(id string, st approval.Status) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.statuses[id] = st
}

const gatewayKey = "ed25519:gateway"

type fixture struct {
	gate  *approval.Gate
	desk  *desk
	owner *approvaltest.Passkey
	now   time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{desk: &desk{statuses: map[string]approval.Status{}}, now: time.Unix(1_800_000_000, 0),
		owner: approvaltest.NewPasskey("idn.example", "https://idn.example")}
	keys := approvaltest.Keys("acme", f.owner)
	g, err := approval.New(approval.Config{Gateway: gatewayKey, Desk: f.desk, Keys: func() *approval.Keys { return keys },
		Clock: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	f.gate = g
	return f
}

func payment() *approval.Call {
	return &approval.Call{Connection: "bank", Service: "bank", Namespace: "agents", PublicKey: "ed25519:agent", AgentName: "payer",
		Subject: "alice", Method: "POST", Path: "/v1/payments", Arguments: []byte(`{"to":"bob","amount":100}`)}
}

// file makes the first call and returns its request.
func (f *fixture) file(t *testing.T, c *approval.Call) approval.Request {
	t.Helper()
	err := f.gate.Admit(context.Background(), c)
	var req *approval.RequiredError
	if !errors.As(err, &req) {
		t.Fatalf("first call: %v, want RequiredError", err)
	}
	r := f.desk.filed[len(f.desk.filed)-1]
	if r.ID != req.ActionID || !r.ExpiresAt.Equal(req.ExpiresAt) {
		t.Fatalf("filed %+v, answered %+v", r, req)
	}
	return r
}

// approve records the owner's approval of r as the dashboard would.
func (f *fixture) approve(r approval.Request, uses int, until time.Time, by *approvaltest.Passkey) {
	g := approval.Grant{ActionID: r.ID, Gateway: r.Gateway, Digest: r.Digest, ExpiresAt: r.ExpiresAt, Uses: uses, Until: until}
	f.desk.set(r.ID, approval.Status{State: "approved", Uses: uses, Until: until, Assertion: by.Assert(approval.Challenge(g), approvaltest.Flags)})
}

func admitted(t *testing.T, f *fixture, c *approval.Call) bool {
	t.Helper()
	err := f.gate.Admit(context.Background(), c)
	var req *approval.RequiredError
	var denied *approval.DeniedError
	switch {
	case err == nil:
		return true
	case errors.As(err, &req), errors.As(err, &denied):
		return false
	}
	t.Fatalf("Admit: %v", err)
	return false
}

func TestApprovedCallPassesOnce(t *testing.T) {
	f := newFixture(t)
	r := f.file(t, payment())
	if admitted(t, f, payment()) {
		t.Fatal("a pending call passed")
	}
	if len(f.desk.filed) != 1 {
		t.Fatalf("the retry filed %d requests, want the one", len(f.desk.filed))
	}
	f.approve(r, 1, time.Time{}, f.owner)
	if !admitted(t, f, payment()) {
		t.Fatal("the approved call was refused")
	}
}

func TestApprovalAttacks(t *testing.T) {
	other := func(edit func(c *approval.Call)) func(*approval.Call) { return edit }
	rows := []struct {
		name    string
		approve func(f *fixture, r approval.Request)
		retry   func(c *approval.Call)
	}{
		{"other arguments", nil, other(func(c *approval.Call) { c.Arguments = []byte(`{"to":"mallory","amount":100}`) })},
		{"another agent", nil, other(func(c *approval.Call) { c.PublicKey = "ed25519:other" })},
		{"another namespace", nil, other(func(c *approval.Call) { c.Namespace = "others" })},
		{"another subject", nil, other(func(c *approval.Call) { c.Subject = "bob" })},
		{"another route", nil, other(func(c *approval.Call) { c.Path = "/v1/payments/batch" })},
		{"another query", nil, other(func(c *approval.Call) { c.Query = "currency=btc" })},
		{"another connection", nil, other(func(c *approval.Call) { c.Connection = "bank2" })},
		{"after expiry", nil, other(func(*approval.Call) {})},
		{"signed without an assertion", func(f *fixture, r approval.Request) {
			f.desk.set(r.ID, approval.Status{State: "approved", Uses: 1})
		}, nil},
		{"another owner's passkey", func(f *fixture, r approval.Request) {
			f.approve(r, 1, time.Time{}, approvaltest.NewPasskey("idn.example", "https://idn.example"))
		}, nil},
		{"assertion for another action id", func(f *fixture, r approval.Request) {
			r2 := r
			r2.ID = "act_other"
			g := approval.Grant{ActionID: r2.ID, Gateway: r.Gateway, Digest: r.Digest, ExpiresAt: r.ExpiresAt, Uses: 1}
			f.desk.set(r.ID, approval.Status{State: "approved", Uses: 1, Assertion: f.owner.Assert(approval.Challenge(g), approvaltest.Flags)})
		}, nil},
		{"assertion for another gateway", func(f *fixture, r approval.Request) {
			g := approval.Grant{ActionID: r.ID, Gateway: "ed25519:elsewhere", Digest: r.Digest, ExpiresAt: r.ExpiresAt, Uses: 1}
			f.desk.set(r.ID, approval.Status{State: "approved", Uses: 1, Assertion: f.owner.Assert(approval.Challenge(g), approvaltest.Flags)})
		}, nil},
		{"uses inflated after signing", func(f *fixture, r approval.Request) {
			f.approve(r, 1, time.Time{}, f.owner)
			st, _ := f.desk.Status(context.Background(), r.ID)
			st.Uses = 5
			f.desk.set(r.ID, st)
		}, nil},
		{"user not verified", func(f *fixture, r approval.Request) {
			g := approval.Grant{ActionID: r.ID, Gateway: r.Gateway, Digest: r.Digest, ExpiresAt: r.ExpiresAt, Uses: 1}
			f.desk.set(r.ID, approval.Status{State: "approved", Uses: 1, Assertion: f.owner.Assert(approval.Challenge(g), 0x01)})
		}, nil},
		{"another origin", func(f *fixture, r approval.Request) {
			evil := *f.owner
			evil.Origin = "https://evil.example"
			f.approve(r, 1, time.Time{}, &evil)
		}, nil},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			f := newFixture(t)
			r := f.file(t, payment())
			if row.approve != nil {
				row.approve(f, r)
			} else {
				f.approve(r, 1, time.Time{}, f.owner)
			}
			c := payment()
			if row.retry != nil {
				row.retry(c)
			}
			if row.name == "after expiry" {
				f.now = r.ExpiresAt
			}
			if admitted(t, f, c) {
				t.Fatal("the call passed")
			}
		})
	}
}

func TestApprovalSecondTime(t *testing.T) {
	f := newFixture(t)
	r := f.file(t, payment())
	f.approve(r, 1, time.Time{}, f.owner)
	if !admitted(t, f, payment()) {
		t.Fatal("the approved call was refused")
	}
	if admitted(t, f, payment()) {
		t.Fatal("a single approval let a second call through")
	}
	if len(f.desk.filed) != 2 {
		t.Fatalf("the second call filed %d requests in all, want a new one", len(f.desk.filed))
	}
}

func TestApprovalUsesAndWindow(t *testing.T) {
	f := newFixture(t)
	r := f.file(t, payment())
	until := r.ExpiresAt.Add(30 * time.Minute)
	f.approve(r, 3, until, f.owner)
	for i := range 3 {
		if !admitted(t, f, payment()) {
			t.Fatalf("use %d of 3 was refused", i+1)
		}
		f.now = r.ExpiresAt.Add(time.Duration(i) * time.Minute) // past the request's expiry, inside the window
	}
	if admitted(t, f, payment()) {
		t.Fatal("a fourth call passed an approval for three")
	}

	r = f.file(t, payment())
	f.approve(r, 5, r.ExpiresAt.Add(time.Minute), f.owner)
	if !admitted(t, f, payment()) {
		t.Fatal("the approved call was refused")
	}
	f.now = r.ExpiresAt.Add(time.Minute)
	if admitted(t, f, payment()) {
		t.Fatal("a call passed after the approval's window")
	}
}

func TestApprovalDenied(t *testing.T) {
	f := newFixture(t)
	r := f.file(t, payment())
	f.desk.set(r.ID, approval.Status{State: "denied"})
	for range 2 {
		err := f.gate.Admit(context.Background(), payment())
		var denied *approval.DeniedError
		if !errors.As(err, &denied) || denied.ActionID != r.ID {
			t.Fatalf("Admit = %v, want DeniedError for %s", err, r.ID)
		}
	}
}

func TestConcurrentRetriesSpendOneUse(t *testing.T) {
	f := newFixture(t)
	r := f.file(t, payment())
	f.approve(r, 1, time.Time{}, f.owner)
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for range 16 {
		wg.Go(func() {
			if f.gate.Admit(context.Background(), payment()) == nil {
				mu.Lock()
				passed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if passed != 1 {
		t.Fatalf("%d concurrent calls passed a single-use approval", passed)
	}
}

func TestDuplicateMembersRefused(t *testing.T) {
	f := newFixture(t)
	c := payment()
	c.Arguments = []byte(`{"amount":1,"to":"bob","amount":1000}`)
	if err := f.gate.Admit(context.Background(), c); !errors.Is(err, approval.ErrDuplicateKey) {
		t.Fatalf("Admit = %v, want ErrDuplicateKey", err)
	}
}
