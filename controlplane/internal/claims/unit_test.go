package claims

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/errcode"
)

// TestErrorTable pins the answer of every domain error, wrapped as the
// store wraps them, so a new one cannot fall through to 500.
func TestErrorRules(t *testing.T) {
	t.Parallel()
	rows := []struct {
		err  error
		code errcode.Code
	}{
		{errNamespaceNotFound, errcode.NamespaceNotFound},
		{errNamespaceDeactivated, errcode.NamespaceDeactivated},
		{ErrServiceNotFound, errcode.ServiceNotFound},
		{errSlugTaken, errcode.SlugTaken},
		{errKeyNotFound, errcode.APIKeyNotFound},
		{errKeyLimit, errcode.APIKeyLimitReached},
		{ErrClaimNotFound, errcode.ClaimNotFound},
		{errPendingLimit, errcode.PendingLimitReached},
		{errAgentPendingLimit, errcode.AgentPendingLimitReached},
		{&transitionError{Action: "approve", From: StatusRevoked}, errcode.ClaimStateConflict},
		{&registryWriteError{Err: errors.New("rpc down")}, errcode.RegistryWriteFailed},
		{sqldb.Err("insert claim", errors.New("connection refused")), errcode.DatabaseUnavailable},
		{errors.New("anything else"), errcode.InternalError},
	}
	for _, row := range rows {
		for _, err := range []error{row.err, fmt.Errorf("controlplane: op: %w", row.err)} {
			if got := web.Answer(ErrorRules.Answer(err)).Code(); got != row.code {
				t.Errorf("answer(%v) = %s, want %s", err, got, row.code)
			}
		}
	}
}

func TestNegotiateAttacks(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		accept string
		want   string
		ok     bool
	}{
		"q zero refuses the type":        {"application/did+json;q=0", "application/did+ld+json", false},
		"q zero on all, wildcard allows": {"application/did+json;q=0, */*;q=0.1", "application/did+ld+json", true},
		"q out of range ignored":         {"application/json;q=7", "", false},
		"garbage ranges ignored":         {";;;, ,,=, application/json", "application/json", true},
		"case of params":                 {"application/did+ld+json; Q=0.9", "application/did+ld+json", true},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := negotiate(tc.accept)
			if ok != tc.ok || (ok && got != tc.want) {
				t.Fatalf("negotiate(%q) = %q, %v", tc.accept, got, ok)
			}
		})
	}
}

// TestFeedCursorsAreSharedFairly: a service paging through many offsets
// of the feed evicts its own remembered cursors, not another service's.
func TestFeedCursorsAreSharedFairly(t *testing.T) {
	t.Parallel()
	c := newCursorCache(8)
	victim := cursorKey{service: "github", version: 1, offset: 500}
	c.put(victim, feedCursor{id: "clm_victim"})
	for i := range 100 {
		c.put(cursorKey{service: "flood-svc", version: 1, offset: i}, feedCursor{id: "clm_flood"})
	}
	if got := c.get(victim); got == nil || got.id != "clm_victim" {
		t.Fatalf("the other service's cursor was evicted: %v", got)
	}
	if len(c.m) != 8 {
		t.Fatalf("%d cursors held, want 8", len(c.m))
	}
	if c.get(cursorKey{service: "flood-svc", version: 1, offset: 99}) == nil {
		t.Fatal("the flooding service's newest cursor is gone")
	}
}

// FuzzAgentNet: agent_ip comes from the submitting service, so any string
// must map to "" or to one network, and an address's network contains it.
func FuzzAgentNet(f *testing.F) {
	for _, s := range []string{"", "192.0.2.1", "::ffff:192.0.2.1", "2001:db8::1", "fe80::1%eth0", "2001:db8::/64", "not-an-ip", "1.2.3.4.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ip string) {
		net := agentNet(ip)
		a, err := netip.ParseAddr(ip)
		if err != nil {
			if net != "" {
				t.Fatalf("agentNet(%q) = %q for an unparsable address", ip, net)
			}
			return
		}
		a = a.Unmap().WithZone("")
		if a.Is4() {
			if net != a.String() {
				t.Fatalf("agentNet(%q) = %q, want %q", ip, net, a)
			}
			return
		}
		p, err := netip.ParsePrefix(net)
		if err != nil || p.Bits() != 64 || !p.Contains(a) {
			t.Fatalf("agentNet(%q) = %q, want the /64 holding it", ip, net)
		}
	})
}

func FuzzSubmitRequest(f *testing.F) {
	f.Add("acme", "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=", "github", "203.0.113.1", "alice")
	f.Add("a", "z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK", "", "::1", "")
	f.Add("acme", "ed25519:", "x", "not-ip", "\x00")
	f.Fuzz(func(t *testing.T, ns, pub, svc, ip, subject string) {
		c, e := submitRequest{Namespace: ns, PublicKey: pub, Service: svc, AgentIP: ip, Subject: subject}.validate()
		if e != nil {
			if e.Code().Status() != 400 {
				t.Fatalf("status %d", e.Code().Status())
			}
			return
		}
		if c.Namespace != ns || !strings.HasPrefix(c.PublicKey, "ed25519:") || len(c.PublicKey) != 52 || c.Service != svc {
			t.Fatalf("accepted %+v", c)
		}
	})
}

func FuzzNegotiate(f *testing.F) {
	for _, s := range []string{"", "*/*", "application/did+ld+json;q=0.9, application/json", "text/html;q=0", "a/b;q=NaN", "application/*;q=1e-9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		got, ok := negotiate(accept)
		if ok {
			found := false
			for _, ty := range didTypes {
				found = found || ty == got
			}
			if !found {
				t.Fatalf("negotiate(%q) = %q, not a supported type", accept, got)
			}
		}
	})
}
