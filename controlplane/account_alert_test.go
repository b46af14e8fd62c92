package controlplane

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane/internal/alertmail/alertmailtest"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/pairing/pairwire"
)

// oauthCall is a record of a call on alice's drive connection through the
// account of subject, refused because it needs reconnecting or served.
func oauthCall(at time.Time, subject string, refused bool) pairwire.Activity {
	a := pairwire.Activity{At: at.Format(time.RFC3339Nano), AgentName: "bot", AgentKey: "ed25519:key", Connection: "drive",
		Service: "drive", Protocol: "http", Method: "GET", Route: "/files", Decision: pairwire.DecisionAllow, Status: 200, Account: &subject}
	if refused {
		a.Decision, a.Reason, a.Status, a.AccountNeedsReconnecting = pairwire.DecisionDeny, "UPSTREAM_AUTH_REQUIRED", 403, true
	}
	return a
}

// stamp is how a time reads in a mail and the API.
func stamp(t time.Time) string { return web.Timestamp(t) }

// TestActivityNamesTheAccount: a record of a call through an OAuth
// account names the account (its subject, "" for the connection's one
// account), in the listing and the exports; other records name none.
func TestActivityNamesTheAccount(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		alice := e.seed(map[string]any{"namespaces": []string{"alice"}}).Sessions["alice"]
		g := e.pairedGateway(alice)
		now := time.Now()
		one := oauthCall(now.Add(-3*time.Second), "", false)
		plain := decisions(now.Add(-2*time.Second), 1)[0]
		e.report(g.id, pairwire.ActivityBatch{Records: []pairwire.Activity{oauthCall(now.Add(-4*time.Second), "alice", false), one, plain}}).
			want(t, http.StatusOK, "")
		r := e.do("GET", "/v1/activity", nil, withSession(alice)).want(t, http.StatusOK, "")
		var l struct {
			Activity []map[string]any `json:"activity"`
		}
		if err := json.Unmarshal(r.body, &l); err != nil || len(l.Activity) != 3 {
			t.Fatalf("listing %s", r.body)
		}
		if a, ok := l.Activity[0]["account"]; ok {
			t.Fatalf("a static connection's record names account %v", a)
		}
		if a, ok := l.Activity[1]["account"]; !ok || a != "" {
			t.Fatalf("the one account's record: account %v, %v", a, ok)
		}
		if a := l.Activity[2]["account"]; a != "alice" {
			t.Fatalf("alice's record: account %v", a)
		}
		csv := e.do("GET", "/v1/activity/export?format=csv", nil, withSession(alice)).want(t, http.StatusOK, "")
		if lines := strings.Split(strings.TrimSpace(string(csv.body)), "\n"); !strings.HasSuffix(lines[0], ",account,event") || !strings.HasSuffix(lines[3], ",alice,") {
			t.Fatalf("export %s", csv.body)
		}
		long := oauthCall(now, strings.Repeat("a", 257), false)
		e.report(g.id, pairwire.ActivityBatch{Records: []pairwire.Activity{long}}).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
		ctl := oauthCall(now, "al\x00ice", false)
		e.report(g.id, pairwire.ActivityBatch{Records: []pairwire.Activity{ctl}}).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
	})
}

// TestReconnectRequiredWebhook: the first call refused because an
// account needs reconnecting queues one connection.reconnect_required
// delivery to the service's webhooks subscribed to it, and mails the
// owner; further refusals do neither, until the account serves a call
// again.
func TestReconnectRequiredWebhook(t *testing.T) {
	smtpAddr, mails := alertmailtest.Server(t)
	forEachEngineWith(t, withWebhooks(func(c *WebhookConfig) {
		c.Alert = AlertConfig{From: "idn@example.com", SMTPAddr: smtpAddr}
	}), func(t *testing.T, e *env, _ StoreConfig) {
		s := e.seed(map[string]any{"namespaces": []string{"alice"}, "services": []map[string]any{{"slug": "drive", "name": "Drive", "owner": "alice"}}})
		alice := s.Sessions["alice"]
		owner := withSession(alice)
		e.do("PATCH", "/v1/auth/settings", map[string]string{"email": "alice@example.com"}, owner).want(t, 200, "")
		// The mails go out in the background: each is awaited, and says
		// which refusal it is for.
		mailed := func() string {
			t.Helper()
			select {
			case m := <-mails:
				return m
			case <-time.After(5 * time.Second):
				t.Fatal("no alert mail")
				return ""
			}
		}
		rc := newReceiver(t)
		whID, secret := e.createWebhook(owner, e.serviceID(owner), map[string]any{"url": rc.ts.URL, "events": []string{"connection.reconnect_required"}})
		rc.setSecret(secret)
		other, _ := e.createWebhook(owner, e.serviceID(owner), map[string]any{"url": rc.ts.URL, "events": []string{"claim.approved"}})
		g := e.pairedGateway(alice)
		now := time.Now()
		batch := func(recs ...pairwire.Activity) {
			t.Helper()
			e.report(g.id, pairwire.ActivityBatch{Records: recs}).want(t, http.StatusOK, "")
		}
		batch(oauthCall(now.Add(-9*time.Second), "bob", false), oauthCall(now.Add(-8*time.Second), "bob", true),
			oauthCall(now.Add(-7*time.Second), "bob", true))
		batch(oauthCall(now.Add(-6*time.Second), "bob", true))
		if ids := e.deliveryIDs(whID); len(ids) != 1 {
			t.Fatalf("%d deliveries after three refusals, want 1", len(ids))
		}
		if m := mailed(); !strings.Contains(m, "RCPT TO:<alice@example.com>") || !strings.Contains(m, `subject "bob" on connection drive`) ||
			!strings.Contains(m, "Refused at: "+stamp(now.Add(-8*time.Second))) {
			t.Fatalf("alert mail %q", m)
		}
		if ids := e.deliveryIDs(other); len(ids) != 0 {
			t.Fatalf("a webhook not subscribed got %d deliveries", len(ids))
		}
		e.deliverDue()
		got, bad := rc.counts()
		if len(got) != 1 || bad != 0 {
			t.Fatalf("received %v, %d bad", got, bad)
		}
		for _, p := range rc.bodies {
			if p.Type != "connection.reconnect_required" || p.Data.Subject != "bob" || p.Data.Service != "drive" || p.Data.Namespace != "alice" {
				t.Fatalf("payload %+v", p)
			}
		}
		// bob connects again and is served: a refusal is told again.
		batch(oauthCall(now.Add(-5*time.Second), "bob", false))
		batch(oauthCall(now.Add(-4*time.Second), "bob", true))
		if ids := e.deliveryIDs(whID); len(ids) != 2 {
			t.Fatalf("%d deliveries after a second refusal, want 2", len(ids))
		}
		// The next mail is this refusal's: none came for those between.
		if m := mailed(); !strings.Contains(m, "Refused at: "+stamp(now.Add(-4*time.Second))) {
			t.Fatalf("the second alert mail %q", m)
		}
		// A call refused because no account is connected at all tells no one.
		none := oauthCall(now.Add(-3*time.Second), "carol", true)
		none.AccountNeedsReconnecting = false
		batch(none)
		if ids := e.deliveryIDs(whID); len(ids) != 2 {
			t.Fatalf("%d deliveries after carol's refusal, want 2", len(ids))
		}

	})
}
