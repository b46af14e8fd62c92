package controlplane

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/alertmail/alertmailtest"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane/internal/webhooks"
)

var testWebhookKey = []byte("webhook-secret-encryption-key-32")

// withWebhooks turns webhooks on (private targets allowed: the receivers
// of these tests listen on loopback) and applies mod.
func withWebhooks(mod func(*WebhookConfig)) func(*Config) {
	return func(c *Config) {
		c.Webhooks = WebhookConfig{SecretKey: testWebhookKey, InsecureAllowPrivateTargets: true}
		if mod != nil {
			mod(&c.Webhooks)
		}
	}
}

// forEachEngineWith is forEachEngine with a configuration change; fn also
// gets the store configuration, to open the same database again.
func forEachEngineWith(t *testing.T, mod func(*Config), fn func(t *testing.T, e *env, sc StoreConfig)) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			sc := storeConfig(t, engine)
			fn(t, newEnv(t, openStore(t, sc), mod), sc)
		})
	}
}

// payload is the Standard Webhooks body of a claim event, as a receiver
// reads it.
type payload struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      struct {
		ClaimID   string `json:"claim_id"`
		Namespace string `json:"namespace"`
		Service   string `json:"service"`
		PublicKey string `json:"public_key"`
		Subject   string `json:"subject"`
		AgentID   string `json:"agent_id"`
		AgentName string `json:"agent_name"`
		Status    string `json:"status"`
	} `json:"data"`
}

// receiver is a webhook endpoint that verifies Standard Webhooks
// signatures independently of the sender's code and counts what it
// accepted per webhook-id.
type receiver struct {
	ts     *httptest.Server
	down   atomic.Bool
	mu     sync.Mutex
	secret string
	got    map[string]int
	bodies map[string]payload
	bad    int
	times  []string
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{got: map[string]int{}, bodies: map[string]payload{}}
	rc.ts = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.ts.Close)
	return rc
}

func (rc *receiver) setSecret(s string) {
	rc.mu.Lock()
	rc.secret = s
	rc.mu.Unlock()
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	if rc.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	body, _ := io.ReadAll(r.Body)
	id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
	rc.mu.Lock()
	defer rc.mu.Unlock()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(rc.secret, "whsec_"))
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
	want := mac.Sum(nil)
	ok := false
	for _, sig := range strings.Fields(r.Header.Get("webhook-signature")) {
		v, b64, _ := strings.Cut(sig, ",")
		got, derr := base64.StdEncoding.DecodeString(b64)
		ok = ok || (v == "v1" && derr == nil && hmac.Equal(got, want))
	}
	var p payload
	if err != nil || !ok || id == "" || json.Unmarshal(body, &p) != nil || r.Header.Get("Content-Type") != "application/json" {
		rc.bad++
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	rc.got[id]++
	rc.bodies[id] = p
	rc.times = append(rc.times, ts)
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) counts() (map[string]int, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string]int{}
	for k, v := range rc.got {
		out[k] = v
	}
	return out, rc.bad
}

// serviceID returns the id of the owner's only service.
func (e *env) serviceID(owner reqOpt) string {
	e.t.Helper()
	list := e.do("GET", "/v1/services", nil, owner).want(e.t, 200, "").json(e.t)["services"].([]any)
	return list[0].(map[string]any)["id"].(string)
}

// createWebhook adds a webhook and returns its id and secret.
func (e *env) createWebhook(owner reqOpt, svcID string, body map[string]any) (string, string) {
	e.t.Helper()
	m := e.do("POST", "/v1/services/"+svcID+"/webhooks", body, owner).want(e.t, 201, "").json(e.t)
	return m["id"].(string), m["secret"].(string)
}

// deliveryState reads one delivery's row.
func (e *env) deliveryState(id string) (state string, attempts int, next time.Time) {
	e.t.Helper()
	var n int64
	if err := e.st.db.QueryRowContext(context.Background(), `SELECT state, attempts, next_attempt_at FROM webhook_deliveries WHERE id = $1`, id).Scan(&state, &attempts, &n); err != nil {
		e.t.Fatal(err)
	}
	return state, attempts, sqldb.FromMicros(n)
}

// deliveryIDs lists the deliveries of a webhook, oldest first.
func (e *env) deliveryIDs(webhookID string) []string {
	e.t.Helper()
	rows, err := e.st.db.QueryContext(context.Background(), `SELECT id FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY created_at, id`, webhookID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		rows.Scan(&id)
		ids = append(ids, id)
	}
	return ids
}

// advanceTo moves the server clock just past at.
func (e *env) advanceTo(at time.Time) {
	e.offset.Store(int64(time.Until(at) + time.Second))
}

func (e *env) deliverDue() int {
	e.t.Helper()
	n, err := e.srv.hooks.DeliverDue(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// approvedDelivery seeds acme/github, a webhook at url for approvals and
// revocations, submits and approves a claim, and returns the webhook, its
// secret, the claim and the delivery id of the approval.
func approvedDelivery(e *env, url string) (whID, secret, claimID, deliveryID string, owner reqOpt) {
	e.t.Helper()
	owner, key := claimWorld(e)
	whID, secret = e.createWebhook(owner, e.serviceID(owner), map[string]any{"url": url, "events": []string{EventApproved, EventRevoked}})
	agent := newAgent(e.t, "acme")
	claimID = e.signed("POST", "/v1/claims", submitBody("acme", pubKey(agent), "github"), withKey(key)).want(e.t, 201, "").json(e.t)["claim_id"].(string)
	e.do("POST", "/v1/claims/"+claimID+"/approve", nil, owner).want(e.t, 200, "")
	ids := e.deliveryIDs(whID)
	if len(ids) != 1 {
		e.t.Fatalf("deliveries after submit+approve = %v, want exactly the approval (submission not subscribed)", ids)
	}
	return whID, secret, claimID, ids[0], owner
}

func TestWebhookCRUD(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, withWebhooks(func(c *WebhookConfig) { c.MaxPerService = 2 }), func(t *testing.T, e *env, _ StoreConfig) {
		owner, _ := claimWorld(e)
		svc := e.serviceID(owner)
		base := "/v1/services/" + svc + "/webhooks"

		created := e.do("POST", base, map[string]any{"url": "https://hooks.example.com/idn?token=abc"}, owner).want(t, 201, "").json(t)
		id, secret := created["id"].(string), created["secret"].(string)
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if !strings.HasPrefix(secret, "whsec_") || err != nil || len(key) != 32 {
			t.Fatalf("generated secret %q: want whsec_ + base64 of 32 bytes", secret)
		}
		if ev := created["events"].([]any); len(ev) != 4 {
			t.Fatalf("default events = %v, want all four", ev)
		}

		// The secret is shown once: never listed, never stored in clear.
		list := e.do("GET", base, nil, owner).want(t, 200, "")
		if strings.Contains(string(list.body), "whsec_") || strings.Contains(string(list.body), "secret") {
			t.Fatalf("listing shows the secret: %s", list.body)
		}
		var stored string
		e.st.db.QueryRowContext(context.Background(), `SELECT secret FROM webhooks WHERE id = $1`, id).Scan(&stored)
		if strings.Contains(stored, secret) || strings.Contains(stored, base64.StdEncoding.EncodeToString(key)) {
			t.Fatal("secret stored in clear")
		}

		supplied := "whsec_" + base64.StdEncoding.EncodeToString([]byte("a-supplied-secret-of-32-bytes!!!"))
		two := e.do("POST", base, map[string]any{"url": "https://b.example.com/", "events": []string{EventRevoked}, "secret": supplied}, owner).
			want(t, 201, "").json(t)
		if two["secret"] != supplied {
			t.Fatalf("supplied secret answered as %v", two["secret"])
		}
		e.do("POST", base, map[string]any{"url": "https://c.example.com/"}, owner).want(t, 409, "WEBHOOK_LIMIT_REACHED")

		upd := e.do("PATCH", base+"/"+id, map[string]any{"url": "https://new.example.com/hook", "events": []string{EventApproved}}, owner).want(t, 200, "").json(t)
		if upd["url"] != "https://new.example.com/hook" || len(upd["events"].([]any)) != 1 {
			t.Fatalf("updated = %v", upd)
		}
		if got := e.do("GET", base+"/"+id, nil, owner).want(t, 200, "").json(t); got["url"] != "https://new.example.com/hook" {
			t.Fatalf("get = %v", got)
		}
		e.do("GET", base+"/"+id+"/deliveries", nil, owner).want(t, 200, "")
		e.do("DELETE", base+"/"+id, nil, owner).want(t, 204, "")
		e.do("GET", base+"/"+id, nil, owner).want(t, 404, "WEBHOOK_NOT_FOUND")
		e.do("DELETE", base+"/"+id, nil, owner).want(t, 404, "WEBHOOK_NOT_FOUND")

		t.Run("bad input", func(t *testing.T) {
			for name, body := range map[string]map[string]any{
				"no url":             {},
				"ftp url":            {"url": "ftp://example.com/"},
				"relative url":       {"url": "/hook"},
				"credentials in url": {"url": "https://user:pw@example.com/"},
				"fragment":           {"url": "https://example.com/#x"},
				"unknown event":      {"url": "https://example.com/", "events": []string{"request.deleted"}},
				"empty events":       {"url": "https://example.com/", "events": []string{}},
				"repeated event":     {"url": "https://example.com/", "events": []string{EventApproved, EventApproved}},
				"short secret":       {"url": "https://example.com/", "secret": "whsec_" + base64.StdEncoding.EncodeToString([]byte("too short"))},
				"secret not base64":  {"url": "https://example.com/", "secret": strings.Repeat("!", 40)},
			} {
				t.Run(name, func(t *testing.T) {
					e.do("POST", base, body, owner).want(t, 400, "VALIDATION_ERROR")
				})
			}
			e.do("PATCH", base+"/"+two["id"].(string), map[string]any{"secret": supplied}, owner).want(t, 400, "VALIDATION_ERROR")
		})
		t.Run("another owner's service", func(t *testing.T) {
			bob := withSession(e.sessions["bob"])
			e.do("GET", base, nil, bob).want(t, 404, "SERVICE_NOT_FOUND")
			e.do("POST", base, map[string]any{"url": "https://x.example.com/"}, bob).want(t, 404, "SERVICE_NOT_FOUND")
			e.do("GET", base+"/"+two["id"].(string)+"/deliveries", nil, bob).want(t, 404, "WEBHOOK_NOT_FOUND")
			e.do("DELETE", base+"/"+two["id"].(string), nil, bob).want(t, 404, "WEBHOOK_NOT_FOUND")
		})
		e.do("GET", base, nil).want(t, 401, "ADMIN_UNAUTHORIZED")
	})
}

func TestWebhooksOffWithoutKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	owner, _ := claimWorld(e)
	e.do("GET", "/v1/services/"+e.serviceID(owner)+"/webhooks", nil, owner).want(t, 503, "WEBHOOKS_DISABLED")
	for name, c := range map[string]WebhookConfig{
		"short key":               {SecretKey: []byte("short")},
		"negative threshold":      {FailureThreshold: -1},
		"bad resolver":            {DNSResolverURL: "not a url"},
		"copies without a sender": {Alert: AlertConfig{To: []string{"ops@example.com"}}},
		"sender with a name":      {Alert: AlertConfig{From: "idn <idn@example.com>"}},
		"server not host:port":    {Alert: AlertConfig{From: "idn@example.com", SMTPAddr: "mail.example.com"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(Config{Store: e.st, JWTSecret: testSecret, Webhooks: c}); err == nil {
				t.Fatal("New accepted the configuration")
			}
		})
	}
	// A sender alone is enough: owners get alerts, with no operator copies,
	// through a mail server on this host.
	if _, err := New(Config{Store: e.st, JWTSecret: testSecret, Webhooks: WebhookConfig{Alert: AlertConfig{From: "idn@example.com"}}}); err != nil {
		t.Fatalf("a sender alone was refused: %v", err)
	}
}

// TestWebhookRetriesThenDelivers: the receiver is down, the delivery is
// retried with growing delays, and delivered once it is back, signed per
// Standard Webhooks with the documented body.
func TestWebhookRetriesThenDelivers(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, withWebhooks(nil), func(t *testing.T, e *env, _ StoreConfig) {
		rc := newReceiver(t)
		rc.down.Store(true)
		whID, secret, claimID, id, owner := approvedDelivery(e, rc.ts.URL+"/hook")
		rc.setSecret(secret)

		var delays []time.Duration
		for attempt := 1; attempt <= 3; attempt++ {
			if n := e.deliverDue(); n != 1 {
				t.Fatalf("attempt %d: delivered %d, want 1", attempt, n)
			}
			state, attempts, next := e.deliveryState(id)
			if state != "pending" || attempts != attempt {
				t.Fatalf("after attempt %d: state %s, attempts %d", attempt, state, attempts)
			}
			delays = append(delays, next.Sub(e.srv.now()))
			if n := e.deliverDue(); n != 0 {
				t.Fatalf("a delivery was retried before its backoff elapsed")
			}
			e.advanceTo(next)
		}
		for i := 1; i < len(delays); i++ {
			if delays[i] < delays[i-1] {
				t.Fatalf("backoff delays %v shrink", delays)
			}
		}
		rc.down.Store(false)
		if n := e.deliverDue(); n != 1 {
			t.Fatalf("retry after recovery attempted %d", n)
		}
		got, bad := rc.counts()
		if got[id] != 1 || len(got) != 1 || bad != 0 {
			t.Fatalf("receiver got %v (bad signatures %d), want %s once", got, bad, id)
		}
		p := rc.bodies[id]
		if p.Type != EventApproved || p.Data.ClaimID != claimID || p.Data.Namespace != "acme" || p.Data.Service != "github" ||
			p.Data.Status != StatusApproved || p.Data.Subject != "alice" || p.Data.AgentID != "a-1" || p.Data.AgentName != "Build bot" ||
			!strings.HasPrefix(p.Data.PublicKey, "ed25519:") || p.Timestamp == "" {
			t.Fatalf("payload = %+v", p)
		}
		if state, attempts, _ := e.deliveryState(id); state != "delivered" || attempts != 4 {
			t.Fatalf("final state %s after %d attempts", state, attempts)
		}
		e.advanceTo(e.srv.now().Add(48 * time.Hour))
		if n := e.deliverDue(); n != 0 {
			t.Fatalf("a delivered webhook was attempted again")
		}

		list := e.do("GET", "/v1/services/"+e.serviceID(owner)+"/webhooks/"+whID+"/deliveries", nil, owner).want(t, 200, "")
		if strings.Contains(string(list.body), secret) || strings.Contains(string(list.body), rc.ts.URL) {
			t.Fatalf("deliveries listing leaks the secret or URL: %s", list.body)
		}
		var out struct {
			Deliveries []webhooks.Delivery `json:"deliveries"`
		}
		json.Unmarshal(list.body, &out)
		if len(out.Deliveries) != 1 || out.Deliveries[0].Status != "delivered" || len(out.Deliveries[0].AttemptLog) != 4 {
			t.Fatalf("deliveries = %s", list.body)
		}
		for i, a := range out.Deliveries[0].AttemptLog {
			want := 503
			if i == 3 {
				want = 204
			}
			if a.Attempt != i+1 || a.StatusCode == nil || *a.StatusCode != want {
				t.Fatalf("attempt %d = %+v, want status %d", i+1, a, want)
			}
			if (i < 3) != (a.Error != "") {
				t.Fatalf("attempt %d error = %q", i+1, a.Error)
			}
		}
	})
}

// TestWebhookSurvivesRestart: the control plane is recreated on the same
// database between attempts, and a worker dies holding a lease; the
// delivery still arrives, exactly once per webhook-id.
func TestWebhookSurvivesRestart(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, withWebhooks(nil), func(t *testing.T, e *env, sc StoreConfig) {
		rc := newReceiver(t)
		rc.down.Store(true)
		_, secret, _, id, _ := approvedDelivery(e, rc.ts.URL)
		rc.setSecret(secret)
		e.deliverDue()
		_, _, next := e.deliveryState(id)

		// Restart: a new Store and Server on the same database.
		e2 := newEnv(t, openStore(t, sc), withWebhooks(nil))
		e2.advanceTo(next)
		rc.down.Store(false)
		// The first instance, still running with its old clock, finds
		// nothing due; the new one delivers.
		if n := e.deliverDue(); n != 0 {
			t.Fatalf("old instance attempted %d before the backoff", n)
		}
		if n := e2.deliverDue(); n != 1 {
			t.Fatalf("restarted instance attempted %d", n)
		}
		e.advanceTo(next.Add(time.Hour))
		e.deliverDue()
		e2.deliverDue()
		if got, bad := rc.counts(); got[id] != 1 || bad != 0 {
			t.Fatalf("receiver got %v, bad %d", got, bad)
		}

		t.Run("worker dies holding a lease", func(t *testing.T) {
			owner := withSession(e.sessions["acme"])
			key := e2.do("POST", "/v1/services/"+e2.serviceID(owner)+"/keys", nil, owner).want(t, 201, "").json(t)["api_key"].(map[string]any)["key"].(string)
			c := e2.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(key)).want(t, 201, "").json(t)
			e2.do("POST", "/v1/claims/"+c["claim_id"].(string)+"/approve", nil, owner).want(t, 200, "")
			// The dead worker's lease, as the worker would have taken it.
			var leased string
			if err := e2.st.db.QueryRowContext(context.Background(), `SELECT id FROM webhook_deliveries WHERE state = 'pending'`).Scan(&leased); err != nil {
				t.Fatal(err)
			}
			if _, err := e2.st.db.Exec(context.Background(), `UPDATE webhook_deliveries SET lease_token = 'lease_dead', lease_until = $2 WHERE id = $1`,
				leased, sqldb.Micros(e2.srv.now().Add(5*time.Minute))); err != nil {
				t.Fatal(err)
			}
			e3 := newEnv(t, openStore(t, sc), withWebhooks(nil))
			e3.offset.Store(e2.offset.Load())
			if n := e3.deliverDue(); n != 0 {
				t.Fatalf("a leased delivery was taken by another worker")
			}
			e3.advanceTo(e3.srv.now().Add(5 * time.Minute))
			if n := e3.deliverDue(); n != 1 {
				t.Fatalf("expired lease not taken over (%d)", n)
			}
			if got, _ := rc.counts(); got[leased] != 1 || len(got) != 2 {
				t.Fatalf("receiver got %v", got)
			}
		})
	})
}

// TestWebhookConcurrentWorkers: several instances on one database deliver
// a burst; every webhook-id arrives exactly once.
func TestWebhookConcurrentWorkers(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, withWebhooks(nil), func(t *testing.T, e *env, sc StoreConfig) {
		rc := newReceiver(t)
		owner, key := claimWorld(e)
		_, secret := e.createWebhook(owner, e.serviceID(owner), map[string]any{"url": rc.ts.URL})
		rc.setSecret(secret)
		const claims = 12
		e.srv.cfg.MaxPendingClaims = claims
		for i := 0; i < claims; i++ {
			c := e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(key)).want(t, 201, "").json(t)
			e.do("POST", "/v1/claims/"+c["claim_id"].(string)+"/approve", nil, owner).want(t, 200, "")
		}
		var workers []*env
		for i := 0; i < 3; i++ {
			workers = append(workers, newEnv(t, openStore(t, sc), withWebhooks(nil)))
		}
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := w.srv.hooks.DeliverDue(context.Background()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		got, bad := rc.counts()
		if len(got) != 2*claims || bad != 0 {
			t.Fatalf("received %d distinct deliveries (bad %d), want %d", len(got), bad, 2*claims)
		}
		for id, n := range got {
			if n != 1 {
				t.Fatalf("%s received %d times", id, n)
			}
		}
	})
}

// TestWebhookTerminalFailure: the receiver stays down through the retry
// window; the delivery fails terminally after the threshold and an alert
// e-mail goes out.
func TestWebhookTerminalFailure(t *testing.T) {
	t.Parallel()
	smtpAddr, mails := alertmailtest.Server(t)
	forEachEngineWith(t, withWebhooks(func(c *WebhookConfig) {
		c.FailureThreshold = 4
		c.RetryWindow = time.Hour
		c.Alert = AlertConfig{From: "idn@example.com", To: []string{"ops@example.com"}, SMTPAddr: smtpAddr}
	}), func(t *testing.T, e *env, _ StoreConfig) {
		rc := newReceiver(t)
		rc.down.Store(true)
		whID, _, _, id, owner := approvedDelivery(e, rc.ts.URL+"/?token=secret-query")
		e.do("PATCH", "/v1/auth/settings", map[string]string{"email": "owner@acme.example"}, owner).want(t, 200, "")
		start := e.srv.now()
		for attempt := 1; ; attempt++ {
			if n := e.deliverDue(); n != 1 {
				t.Fatalf("attempt %d: %d attempted", attempt, n)
			}
			state, attempts, next := e.deliveryState(id)
			if state == "failed" {
				if attempts != 4 {
					t.Fatalf("failed after %d attempts, want the threshold 4", attempts)
				}
				break
			}
			if attempt >= 4 || next.Sub(start) > time.Hour {
				t.Fatalf("attempt %d: still %s, next at +%v", attempt, state, next.Sub(start))
			}
			e.advanceTo(next)
		}
		e.advanceTo(e.srv.now().Add(24 * time.Hour))
		if n := e.deliverDue(); n != 0 {
			t.Fatal("a failed delivery was attempted again")
		}
		d := e.do("GET", "/v1/services/"+e.serviceID(owner)+"/webhooks/"+whID+"/deliveries", nil, owner).want(t, 200, "").json(t)
		rec := d["deliveries"].([]any)[0].(map[string]any)
		if rec["status"] != "failed" || rec["attempts"].(float64) != 4 || rec["last_status_code"].(float64) != 503 || rec["finished_at"] == nil {
			t.Fatalf("delivery = %v", rec)
		}
		// The owner's alert, then the operator copy.
		for _, rcpt := range []string{"RCPT TO:<owner@acme.example>", "RCPT TO:<ops@example.com>"} {
			select {
			case m := <-mails:
				if !strings.Contains(m, id) || !strings.Contains(m, rcpt) || strings.Contains(m, "secret-query") {
					t.Fatalf("alert mail for %s = %q", rcpt, m)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("no alert e-mail for %s", rcpt)
			}
		}

		t.Run("owner opted out", func(t *testing.T) {
			e.do("PATCH", "/v1/auth/settings", map[string]bool{"webhook_failures_notify": false}, owner).want(t, 200, "")
			if _, wanted, err := e.srv.webhookAlertAddress(context.Background(), "acme"); wanted || err != nil {
				t.Fatalf("alerts still wanted (%v)", err)
			}
			if addr, wanted, err := e.srv.webhookAlertAddress(context.Background(), "gone"); addr != "" || !wanted || err != nil {
				t.Fatalf("a deleted owner's alerts: %q, %v, %v; want the operator copies", addr, wanted, err)
			}
		})
	})
}

// TestWebhookOutboxCoversEveryPath: events are queued by the database in
// the claim change's transaction, so changes made outside the HTTP
// handlers (service deletion, a bulk revocation) are delivered too, even
// after the webhook itself went with its service.
func TestWebhookOutboxCoversEveryPath(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, withWebhooks(nil), func(t *testing.T, e *env, _ StoreConfig) {
		rc := newReceiver(t)
		owner, key := claimWorld(e)
		svc := e.serviceID(owner)
		whID, secret := e.createWebhook(owner, svc, map[string]any{"url": rc.ts.URL})
		rc.setSecret(secret)
		approved := e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(key)).want(t, 201, "").json(t)["claim_id"].(string)
		e.do("POST", "/v1/claims/"+approved+"/approve", nil, owner).want(t, 200, "")
		pending := e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(key)).want(t, 201, "").json(t)["claim_id"].(string)
		// A claim of another service is not sent to this one's webhook.
		e.seed(map[string]any{"claims": []map[string]string{{"namespace": "acme", "service": "slack", "public_key": pubKey(newAgent(t, "acme")), "status": "pending"}}})
		e.deliverDue()
		e.do("DELETE", "/v1/services/"+svc, nil, owner).want(t, 204, "")
		if n := e.deliverDue(); n != 2 {
			t.Fatalf("service deletion queued %d deliveries, want the revocation and the rejection", n)
		}
		got, bad := rc.counts()
		types := map[string]string{}
		for id := range got {
			types[rc.bodies[id].Type+" "+rc.bodies[id].Data.ClaimID] = id
		}
		for _, want := range []string{EventSubmitted + " " + approved, EventApproved + " " + approved, EventRevoked + " " + approved,
			EventSubmitted + " " + pending, EventRejected + " " + pending} {
			if types[want] == "" {
				t.Errorf("missing %s; got %v", want, types)
			}
		}
		if len(got) != 5 || bad != 0 {
			t.Fatalf("received %v (bad %d)", got, bad)
		}
		if ids := e.deliveryIDs(whID); len(ids) != 5 {
			t.Fatalf("deliveries of the deleted webhook: %v", ids)
		}
	})
}

// TestWebhookDeleteCancelsQueued: deleting a webhook cancels what it had
// queued.
func TestWebhookDeleteCancelsQueued(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), withWebhooks(nil))
	rc := newReceiver(t)
	rc.down.Store(true)
	whID, _, _, id, owner := approvedDelivery(e, rc.ts.URL)
	e.deliverDue()
	e.do("DELETE", "/v1/services/"+e.serviceID(owner)+"/webhooks/"+whID, nil, owner).want(t, 204, "")
	if state, _, _ := e.deliveryState(id); state != "canceled" {
		t.Fatalf("state = %s", state)
	}
	e.advanceTo(e.srv.now().Add(48 * time.Hour))
	if n := e.deliverDue(); n != 0 {
		t.Fatal("canceled delivery attempted")
	}
}

// Webhook events have claim names (claim.approved, …) beside the request.*
// names they were first given, which stay as aliases: a webhook gets each
// event under the name it subscribed with, so stored subscriptions and
// their receivers go on as before.
func TestWebhookClaimEventNames(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, withWebhooks(nil), func(t *testing.T, e *env, _ StoreConfig) {
		owner, key := claimWorld(e)
		svc := e.serviceID(owner)
		base := "/v1/services/" + svc + "/webhooks"
		byClaim, byRequest, mixed := newReceiver(t), newReceiver(t), newReceiver(t)
		for _, tc := range []struct {
			rc     *receiver
			events []string
		}{
			{byClaim, []string{ClaimSubmitted, ClaimApproved, ClaimRejected, ClaimRevoked}},
			{byRequest, nil}, // the default: the request.* names, as before
			{mixed, []string{ClaimApproved, EventRevoked}},
		} {
			body := map[string]any{"url": tc.rc.ts.URL}
			if tc.events != nil {
				body["events"] = tc.events
			}
			created := e.do("POST", base, body, owner).want(t, 201, "").json(t)
			tc.rc.setSecret(created["secret"].(string))
			want := tc.events
			if want == nil {
				want = []string{EventSubmitted, EventApproved, EventRejected, EventRevoked}
			}
			if got := fmt.Sprint(created["events"]); got != fmt.Sprint(want) {
				t.Errorf("subscribed events %s, want %v", got, want)
			}
		}
		id := e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(key)).want(t, 201, "").json(t)["claim_id"].(string)
		e.do("POST", "/v1/claims/"+id+"/approve", nil, owner).want(t, 200, "")
		e.do("POST", "/v1/claims/"+id+"/revoke", nil, owner).want(t, 200, "")
		e.deliverDue()
		for name, tc := range map[string]struct {
			rc   *receiver
			want []string
		}{
			"claim names":   {byClaim, []string{ClaimApproved, ClaimRevoked, ClaimSubmitted}},
			"request names": {byRequest, []string{EventApproved, EventRevoked, EventSubmitted}},
			"mixed":         {mixed, []string{ClaimApproved, EventRevoked}},
		} {
			tc.rc.mu.Lock()
			var types []string
			for _, p := range tc.rc.bodies {
				types = append(types, p.Type)
			}
			tc.rc.mu.Unlock()
			slices.Sort(types)
			if fmt.Sprint(types) != fmt.Sprint(tc.want) {
				t.Errorf("%s: delivered %v, want %v", name, types, tc.want)
			}
		}
		t.Run("one event under both names", func(t *testing.T) {
			e.do("POST", base, map[string]any{"url": "https://example.com/", "events": []string{ClaimApproved, EventApproved}}, owner).
				want(t, 400, "VALIDATION_ERROR")
		})
	})
}
