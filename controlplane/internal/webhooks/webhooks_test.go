package webhooks_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/alertmail/alertmailtest"
	"github.com/idnhq/idn/controlplane/internal/sqldb/sqldbtest"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane/internal/alertmail"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/controlplane/internal/webhooks"
)

// supplied is a Standard Webhooks secret an owner brings.
var supplied = "whsec_" + base64.StdEncoding.EncodeToString([]byte("a-supplied-secret-of-32-bytes!!!"))

// TestRoutes: the owner routes keep each owner to their services and
// answer each refusal with its code.
func TestRoutes(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *sqldb.DB) {
		w := seeded(t, db, webhooks.Config{SecretKey: testKey, MaxPerService: 2}, nil)
		base := "/v1/services/svc_github/webhooks"
		created := w.do("POST", base, "acme", map[string]any{"url": "https://hooks.example.com/idn", "secret": supplied}).want(t, 201, "").json(t)
		id := created["id"].(string)
		if created["secret"] != supplied || len(created["events"].([]any)) != 4 {
			t.Fatalf("created = %v", created)
		}

		t.Run("secret sealed and bound to its webhook", func(t *testing.T) {
			var stored string
			if err := db.QueryRowContext(context.Background(), `SELECT secret FROM webhooks WHERE id = $1`, id).Scan(&stored); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(stored, strings.TrimPrefix(supplied, "whsec_")) {
				t.Fatal("secret stored in clear")
			}
			if got, err := w.m.OpenSecret(id, stored); err != nil || got != supplied {
				t.Fatalf("open = %q, %v", got, err)
			}
			if _, err := w.m.OpenSecret("whk_other", stored); err == nil {
				t.Fatal("ciphertext opened under another webhook id")
			}
		})

		list := w.do("GET", base, "acme", nil).want(t, 200, "")
		if strings.Contains(string(list.body), "whsec_") {
			t.Fatalf("listing shows the secret: %s", list.body)
		}
		if l, err := w.m.List(context.Background(), "acme", "svc_github"); err != nil || len(l) != 1 || l[0].ID != id || l[0].Secret != "" {
			t.Fatalf("List = %v, %v", l, err)
		}
		w.do("POST", base, "acme", map[string]any{"url": "https://b.example.com/", "events": []string{webhooks.EventRevoked}}).want(t, 201, "")

		for _, tc := range []struct {
			name, method, path, owner string
			body                      map[string]any
			status                    int
			code                      string
		}{
			{"over the limit", "POST", base, "acme", map[string]any{"url": "https://c.example.com/"}, 409, "WEBHOOK_LIMIT_REACHED"},
			{"no session", "GET", base, "", nil, 401, "ADMIN_UNAUTHORIZED"},
			{"another owner lists", "GET", base, "bob", nil, 404, "SERVICE_NOT_FOUND"},
			{"another owner creates", "POST", base, "bob", map[string]any{"url": "https://x.example.com/"}, 404, "SERVICE_NOT_FOUND"},
			{"another owner reads", "GET", base + "/" + id, "bob", nil, 404, "WEBHOOK_NOT_FOUND"},
			{"another owner deletes", "DELETE", base + "/" + id, "bob", nil, 404, "WEBHOOK_NOT_FOUND"},
			{"another owner tests", "POST", base + "/" + id + "/test", "bob", nil, 404, "WEBHOOK_NOT_FOUND"},
			{"loopback target (SSRF)", "PATCH", base + "/" + id, "acme", map[string]any{"url": "http://127.0.0.1/"}, 400, "WEBHOOK_URL_FORBIDDEN"},
			{"metadata target (SSRF)", "PATCH", base + "/" + id, "acme", map[string]any{"url": "http://169.254.169.254/"}, 400, "WEBHOOK_URL_FORBIDDEN"},
			{"unknown event", "PATCH", base + "/" + id, "acme", map[string]any{"events": []string{"request.deleted"}}, 400, "VALIDATION_ERROR"},
			{"secret change", "PATCH", base + "/" + id, "acme", map[string]any{"secret": supplied}, 400, "VALIDATION_ERROR"},
			{"deliveries limit", "GET", base + "/" + id + "/deliveries?limit=101", "acme", nil, 400, "VALIDATION_ERROR"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var body any
				if tc.body != nil {
					body = tc.body
				}
				w.do(tc.method, tc.path, tc.owner, body).want(t, tc.status, tc.code)
			})
		}

		upd := w.do("PATCH", base+"/"+id, "acme", map[string]any{"url": "https://new.example.com/hook"}).want(t, 200, "").json(t)
		if upd["url"] != "https://new.example.com/hook" {
			t.Fatalf("updated = %v", upd)
		}
		w.do("DELETE", base+"/"+id, "acme", nil).want(t, 204, "")
		w.do("GET", base+"/"+id, "acme", nil).want(t, 404, "WEBHOOK_NOT_FOUND")
	})
}

// TestOffWithoutKey: without a secret key every route answers 503 and
// nothing is delivered.
func TestOffWithoutKey(t *testing.T) {
	t.Parallel()
	w := seeded(t, sqldbtest.Open(t, sqldb.ProviderSQLite), webhooks.Config{}, nil)
	if w.m.On() {
		t.Fatal("on without a key")
	}
	w.do("GET", "/v1/services/svc_github/webhooks", "acme", nil).want(t, 503, "WEBHOOKS_DISABLED")
	if n := w.deliverDue(); n != 0 {
		t.Fatalf("delivered %d", n)
	}
	for name, cfg := range map[string]webhooks.Config{
		"short key":            {SecretKey: []byte("short")},
		"negative threshold":   {FailureThreshold: -1},
		"bad resolver":         {DNSResolverURL: "not a url"},
		"copies without From":  {Alert: alertmail.Config{To: []string{"ops@example.com"}}},
		"server not host:port": {Alert: alertmail.Config{From: "idn@example.com", SMTPAddr: "mail.example.com"}},
	} {
		t.Run(name, func(t *testing.T) {
			kit := &web.Kit{Log: slog.New(slog.DiscardHandler), Clock: time.Now}
			if _, err := webhooks.New(cfg, webhooks.Deps{DB: w.db, Kit: kit, Owner: testOwner}); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
}

// TestTestEvent: an owner's test event goes through the queue, signed,
// and shows in the webhook's deliveries; one waits at a time per webhook.
func TestTestEvent(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *sqldb.DB) {
		w := seeded(t, db, webhooks.Config{SecretKey: testKey, InsecureAllowPrivateTargets: true}, nil)
		rc := newReceiver(t, supplied)
		base := "/v1/services/svc_github/webhooks"
		id := w.do("POST", base, "acme", map[string]any{"url": rc.url, "secret": supplied}).want(t, 201, "").json(t)["id"].(string)

		queued := w.do("POST", base+"/"+id+"/test", "acme", nil).want(t, 202, "").json(t)
		if queued["event_type"] != webhooks.EventTest {
			t.Fatalf("queued = %v", queued)
		}
		again := w.do("POST", base+"/"+id+"/test", "acme", nil).want(t, 429, "RATE_LIMITED")
		if again.header.Get("Retry-After") != "10" {
			t.Fatalf("Retry-After = %q, want the delivery timeout", again.header.Get("Retry-After"))
		}
		if n := w.deliverDue(); n != 1 {
			t.Fatalf("delivered %d", n)
		}
		got, bad := rc.received()
		p := got[queued["delivery_id"].(string)]
		if bad != 0 || p.Type != webhooks.EventTest || p.Data.Namespace != "acme" || p.Data.Service != "github" || p.Data.ClaimID != "" {
			t.Fatalf("received %v (bad %d)", got, bad)
		}
		ds, err := w.m.Deliveries(context.Background(), "acme", "svc_github", id, 10)
		if err != nil || len(ds) != 1 || ds[0].Status != "delivered" || len(ds[0].AttemptLog) != 1 || *ds[0].AttemptLog[0].StatusCode != 204 {
			t.Fatalf("deliveries = %+v, %v", ds, err)
		}
		w.do("POST", base+"/"+id+"/test", "acme", nil).want(t, 202, "")
	})
}

// TestDeadWorkerLease: a delivery leased by a worker that died is taken
// over once the lease expires, and the dead worker's late completion is
// refused, so the webhook-id succeeds once.
func TestDeadWorkerLease(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *sqldb.DB) {
		w := seeded(t, db, webhooks.Config{SecretKey: testKey, InsecureAllowPrivateTargets: true}, nil)
		rc := newReceiver(t, supplied)
		base := "/v1/services/svc_github/webhooks"
		id := w.do("POST", base, "acme", map[string]any{"url": rc.url, "secret": supplied}).want(t, 201, "").json(t)["id"].(string)
		w.do("POST", base+"/"+id+"/test", "acme", nil).want(t, 202, "")
		ctx := context.Background()
		leased, err := w.m.Lease(ctx, "lease_dead", time.Now())
		if err != nil || len(leased) != 1 {
			t.Fatalf("lease: %v, %v", leased, err)
		}
		if n := w.deliverDue(); n != 0 {
			t.Fatal("a leased delivery was taken by another worker")
		}
		w.offset.Store(int64(5*time.Minute + time.Second))
		if n := w.deliverDue(); n != 1 {
			t.Fatalf("expired lease not taken over (%d)", n)
		}
		if ok, err := w.m.FinishDelivered(ctx, leased[0], "lease_dead", time.Now()); ok || err != nil {
			t.Fatalf("stale lease completed: ok %v, err %v", ok, err)
		}
		if got, _ := rc.received(); len(got) != 1 {
			t.Fatalf("received %v", got)
		}
	})
}

// TestFailureAlert: a delivery that fails for good is mailed to the owner
// and the operator copies, as the owner's setting says.
func TestFailureAlert(t *testing.T) {
	t.Parallel()
	smtpAddr, mails := alertmailtest.Server(t)
	for _, tc := range []struct {
		name    string
		alertTo webhooks.AlertAddress
		want    []string
	}{
		{"owner and copies", func(context.Context, string) (string, bool, error) { return "owner@acme.example", true, nil },
			[]string{"RCPT TO:<owner@acme.example>", "RCPT TO:<ops@example.com>"}},
		{"owner without an address", func(context.Context, string) (string, bool, error) { return "", true, nil },
			[]string{"RCPT TO:<ops@example.com>"}},
		{"owner opted out", func(context.Context, string) (string, bool, error) { return "owner@acme.example", false, nil }, nil},
		{"no owner lookup", nil, []string{"RCPT TO:<ops@example.com>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := seeded(t, sqldbtest.Open(t, sqldb.ProviderSQLite), webhooks.Config{SecretKey: testKey, InsecureAllowPrivateTargets: true, FailureThreshold: 1,
				Alert: alertmail.Config{From: "idn@example.com", To: []string{"ops@example.com"}, SMTPAddr: smtpAddr}}, tc.alertTo)
			rc := newReceiver(t, supplied)
			rc.down.Store(true)
			base := "/v1/services/svc_github/webhooks"
			id := w.do("POST", base, "acme", map[string]any{"url": rc.url + "/?token=secret-query", "secret": supplied}).want(t, 201, "").json(t)["id"].(string)
			delivery := w.do("POST", base+"/"+id+"/test", "acme", nil).want(t, 202, "").json(t)["delivery_id"].(string)
			if n := w.deliverDue(); n != 1 {
				t.Fatalf("attempted %d", n)
			}
			if ds, _ := w.m.Deliveries(context.Background(), "acme", "svc_github", id, 1); len(ds) != 1 || ds[0].Status != "failed" {
				t.Fatalf("deliveries = %+v", ds)
			}
			// The mails were sent before DeliverDue returned.
			var got []string
			for len(mails) > 0 {
				m := <-mails
				if !strings.Contains(m, delivery) || strings.Contains(m, "secret-query") {
					t.Fatalf("alert mail = %q", m)
				}
				for _, line := range strings.Split(m, "\r\n") {
					if strings.HasPrefix(line, "RCPT TO:") {
						got = append(got, line)
					}
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("mailed %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNextAttempt: a retry that would land outside the window is not
// scheduled.
func TestNextAttempt(t *testing.T) {
	t.Parallel()
	w := newWorld(t, sqldbtest.Open(t, sqldb.ProviderSQLite), webhooks.Config{SecretKey: testKey, RetryWindow: time.Hour}, nil)
	now := time.Now()
	if next := w.m.NextAttempt(1, now.Add(-time.Hour+time.Second), now); !next.IsZero() {
		t.Fatalf("retry scheduled at %v, past the window", next)
	}
	if next := w.m.NextAttempt(1, now, now); next.IsZero() || next.Sub(now) > time.Hour {
		t.Fatalf("first retry at %v", next)
	}
	if next := w.m.NextAttempt(10, now, now); !next.IsZero() {
		t.Fatalf("retry after the threshold at %v", next)
	}
}

// TestSignatureVector checks the signature against the Standard Webhooks
// reference example.
func TestSignatureVector(t *testing.T) {
	t.Parallel()
	key, _ := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	got := webhooks.Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature = %s, want %s", got, want)
	}
}

// TestEventsIsACopy: the subscribable events cannot be changed through
// Events.
func TestEventsIsACopy(t *testing.T) {
	t.Parallel()
	e := webhooks.Events()
	e[0] = "x"
	if got := webhooks.Events(); got[0] != webhooks.ClaimSubmitted || len(got) != 4 {
		t.Fatalf("Events = %v", got)
	}
}

// BenchmarkDelivery measures one delivery pass end to end on SQLite:
// lease, decrypt, sign, POST to a local receiver, record the attempt.
func BenchmarkDelivery(b *testing.B) {
	db := sqldbtest.Open(b, sqldb.ProviderSQLite)
	seedService(b, db, "acme", "svc_github", "github")
	kit := &web.Kit{Log: slog.New(slog.DiscardHandler), Clock: time.Now, MaxBodyBytes: 1 << 20}
	m, err := webhooks.New(webhooks.Config{SecretKey: testKey, InsecureAllowPrivateTargets: true}, webhooks.Deps{DB: db, Kit: kit, Owner: testOwner})
	if err != nil {
		b.Fatal(err)
	}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	defer receiver.Close()
	mux := http.NewServeMux()
	m.Routes(mux)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/v1/services/svc_github/webhooks", strings.NewReader(`{"url":"`+receiver.URL+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Owner", "acme")
	mux.ServeHTTP(rec, req)
	if rec.Code != 201 {
		b.Fatalf("create webhook: %d %s", rec.Code, rec.Body)
	}
	// b.N deliveries of the webhook, as the claim triggers write them.
	ctx, now := context.Background(), sqldb.Micros(time.Now())
	for i := 0; i < b.N; i++ {
		if _, err := db.Exec(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, url, secret, event_type, occurred_at,
				claim_id, namespace, service, public_key, subject, agent_id, agent_name, claim_status,
				state, attempts, next_attempt_at, created_at)
			SELECT $1, id, url, secret, 'request.submitted', $2, 'clm_x', 'acme', 'github', '', '', '', '', 'pending', 'pending', 0, $2, $2
			FROM webhooks`, fmt.Sprintf("msg_%d", i), now); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	n, err := m.DeliverDue(ctx)
	if err != nil || n != b.N {
		b.Fatalf("delivered %d of %d: %v", n, b.N, err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
}
