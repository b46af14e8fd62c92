package proxy

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/approval/approvaltest"
)

// memDesk is a control plane in memory for the approval gate.
type memDesk struct {
	mu       sync.Mutex
	filed    []approval.Request
	statuses map[string]approval.Status
}

func (d *memDesk) File(_ context.Context, r approval.Request) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.filed = append(d.filed, r)
	return nil
}

func (d *memDesk) Status(_ context.Context, id string) (approval.Status, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st, ok := d.statuses[id]; ok {
		return st, nil
	}
	return approval.Status{State: "pending"}, nil
}

func (d *memDesk) request(id string) approval.Request {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.filed {
		if r.ID == id {
			return r
		}
	}
	return approval.Request{}
}

// approveWith records the owner's approval of action id, signed by key.
func (d *memDesk) approveWith(id string, key *approvaltest.Passkey) {
	r := d.request(id)
	g := approval.Grant{ActionID: r.ID, Gateway: r.Gateway, Digest: r.Digest, ExpiresAt: r.ExpiresAt, Uses: 1}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.statuses[id] = approval.Status{State: "approved", Uses: 1, Assertion: key.Assert(approval.Challenge(g), approvaltest.Flags)}
}

func newApprovalGateway(t *testing.T) (*gateway, *memDesk, *approvaltest.Passkey) {
	t.Helper()
	desk := &memDesk{statuses: map[string]approval.Status{}}
	owner := approvaltest.NewPasskey("idn.example", "https://idn.example")
	keys := approvaltest.Keys("owner", owner)
	var gate *approval.Gate
	g := newGateway(t, gatewayOptions{approvals: approvalsFunc(func(ctx context.Context, c *approval.Call) error { return gate.Admit(ctx, c) })})
	var err error
	gate, err = approval.New(approval.Config{Gateway: "ed25519:gw", Desk: desk, Keys: func() *approval.Keys { return keys }, Clock: g.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	return g, desk, owner
}

type approvalsFunc func(context.Context, *approval.Call) error

func (f approvalsFunc) Admit(ctx context.Context, c *approval.Call) error { return f(ctx, c) }

const paymentBody = `{"to":"bob","amount":100}`

func TestApprovalRouteHeldUntilApproved(t *testing.T) {
	g, desk, owner := newApprovalGateway(t)
	a := g.do(g.request(g.agent, "POST", "/proxy/pay/v1/payments", paymentBody))
	if a.status != http.StatusForbidden || a.env["code"] != "AUTH_ACTION_APPROVAL_REQUIRED" {
		t.Fatalf("first call: %d %s", a.status, a.body)
	}
	id, _ := a.env["action_id"].(string)
	if id == "" || a.env["expires_at"] == nil || strings.Contains(string(a.body), "bob") {
		t.Fatalf("answer %s: want action_id and expires_at, and no argument", a.body)
	}
	if g.up.lastSeen().Path != "" {
		t.Fatal("a held call reached the upstream")
	}
	r := desk.request(id)
	if r.Target != "POST /v1/payments" || r.Namespace != "agent-ns" || !strings.Contains(string(r.Document), `"amount":100`) {
		t.Fatalf("filed %+v", r)
	}
	if strings.Contains(string(r.Document), upstreamToken) {
		t.Fatal("the action request carries the connection's secret")
	}
	desk.approveWith(id, owner)
	a = g.do(g.request(g.agent, "POST", "/proxy/pay/v1/payments", paymentBody))
	if a.status != http.StatusOK || g.up.lastSeen().Body != paymentBody {
		t.Fatalf("approved retry: %d %s", a.status, a.body)
	}
	if strings.Contains(g.logs.String(), "bob") {
		t.Fatal("the arguments reached the log")
	}
	a = g.do(g.request(g.agent, "POST", "/proxy/pay/v1/payments", paymentBody))
	if a.env["code"] != "AUTH_ACTION_APPROVAL_REQUIRED" || a.env["action_id"] == id {
		t.Fatalf("second call after a single approval: %d %s", a.status, a.body)
	}
}

func TestApprovalRouteAttacks(t *testing.T) {
	rows := []struct {
		name string
		send func(g *gateway, approved string) *http.Request
	}{
		{"other arguments", func(g *gateway, _ string) *http.Request {
			return g.request(g.agent, "POST", "/proxy/pay/v1/payments", `{"to":"mallory","amount":100}`)
		}},
		{"another agent", func(g *gateway, _ string) *http.Request {
			g.approve(g.stranger)
			g.refresh()
			return g.request(g.stranger, "POST", "/proxy/pay/v1/payments", paymentBody)
		}},
		{"another route spelled alike", func(g *gateway, _ string) *http.Request {
			return g.request(g.agent, "POST", "/proxy/pay/v1//payments/", paymentBody)
		}},
		{"forged action_id", func(g *gateway, approved string) *http.Request {
			r := g.request(g.agent, "POST", "/proxy/pay/v1/payments?action_id="+approved, `{"to":"mallory","amount":1}`)
			r.Header.Set("Idn-Action-Id", approved)
			return r
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			g, desk, owner := newApprovalGateway(t)
			a := g.do(g.request(g.agent, "POST", "/proxy/pay/v1/payments", paymentBody))
			id, _ := a.env["action_id"].(string)
			desk.approveWith(id, owner)
			a = g.do(row.send(g, id))
			if a.status != http.StatusForbidden || a.env["code"] != "AUTH_ACTION_APPROVAL_REQUIRED" || a.env["action_id"] == id {
				t.Fatalf("%d %s", a.status, a.body)
			}
			if g.up.lastSeen().Path != "" {
				t.Fatal("the call reached the upstream")
			}
		})
	}
}

func TestApprovalRulesThatDoNotMatch(t *testing.T) {
	g, desk, _ := newApprovalGateway(t)
	for _, call := range []struct{ method, path string }{{"GET", "/proxy/pay/v1/payments"}, {"POST", "/proxy/pay/v1/quotes"}, {"POST", "/proxy/ruled/user"}} {
		body := ""
		if call.method == "POST" {
			body = paymentBody
		}
		if a := g.do(g.request(g.agent, call.method, call.path, body)); a.status != http.StatusOK {
			t.Errorf("%s %s: %d %s", call.method, call.path, a.status, a.body)
		}
	}
	if len(desk.filed) != 0 {
		t.Fatalf("%d requests filed for calls no rule matches", len(desk.filed))
	}
}

func TestApprovalRouteWithoutDesk(t *testing.T) {
	g := newGateway(t, gatewayOptions{})
	a := g.do(g.request(g.agent, "POST", "/proxy/pay/v1/payments", paymentBody))
	if a.status != http.StatusBadGateway || a.env["code"] != "AUTH_ACTION_SUBMIT_FAILED" || g.up.lastSeen().Path != "" {
		t.Fatalf("%d %s", a.status, a.body)
	}
}

// TestApprovalSubjectRoutes: alice's own rule holds her transfers on top
// of the connection's rules, however her subject is spelt; other
// subjects' transfers pass, and a request without its subject never
// reaches the rules.
func TestApprovalSubjectRoutes(t *testing.T) {
	const transfer = "/proxy/pay/v1/transfers"
	rows := []struct {
		name, subject string
		drop, held    bool
	}{
		{name: "alice's transfer", subject: "alice", held: true},
		{name: "attack: alice in upper case", subject: "ALICE", held: true},
		{name: "attack: alice in mixed case", subject: "aLiCe", held: true},
		{name: "attack: alice with spaces around", subject: "  alice\t", held: true},
		{name: "bob's transfer", subject: "bob"},
		{name: "the namespace as subject", subject: ""},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			g, desk, _ := newApprovalGateway(t)
			a := g.do(g.requestFor(g.agent, row.subject, "POST", transfer, paymentBody))
			if row.held {
				if a.status != http.StatusForbidden || a.env["code"] != "AUTH_ACTION_APPROVAL_REQUIRED" || g.up.lastSeen().Path != "" {
					t.Fatalf("%d %s", a.status, a.body)
				}
				if r := desk.request(a.env["action_id"].(string)); r.Subject != strings.Trim(row.subject, " \t") {
					t.Fatalf("filed for subject %q", r.Subject)
				}
				return
			}
			if a.status != http.StatusOK || len(desk.filed) != 0 {
				t.Fatalf("%d %s, %d filed", a.status, a.body, len(desk.filed))
			}
		})
	}
	t.Run("attack: subject header removed", func(t *testing.T) {
		g, desk, _ := newApprovalGateway(t)
		r := g.requestFor(g.agent, "alice", "POST", transfer, paymentBody)
		r.Header.Del("Idn-Subject")
		if a := g.do(r); a.env["code"] != "AUTH_IDENTITY_INVALID" || g.up.lastSeen().Path != "" || len(desk.filed) != 0 {
			t.Fatalf("%d %s", a.status, a.body)
		}
	})
	t.Run("the connection's rule still holds alice", func(t *testing.T) {
		g, _, _ := newApprovalGateway(t)
		if a := g.do(g.requestFor(g.agent, "alice", "POST", "/proxy/pay/v1/payments", paymentBody)); a.env["code"] != "AUTH_ACTION_APPROVAL_REQUIRED" {
			t.Fatalf("%d %s", a.status, a.body)
		}
	})
}
