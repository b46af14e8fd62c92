package webhooks_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/sqldb/sqldbtest"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/controlplane/internal/webhooks"
)

var testKey = []byte("webhook-secret-encryption-key-32")

// forEachEngine runs fn on a fresh database of each engine.
func forEachEngine(t *testing.T, fn func(t *testing.T, db *sqldb.DB)) {
	for _, engine := range sqldbtest.Engines {
		t.Run(engine, func(t *testing.T) { fn(t, sqldbtest.Open(t, engine)) })
	}
}

// seedService makes namespace owner (once) and its service id with slug,
// as the rest of the control plane would.
func seedService(tb testing.TB, db *sqldb.DB, owner, id, slug string) {
	tb.Helper()
	ctx, now := context.Background(), sqldb.Micros(time.Now())
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM namespaces WHERE namespace = $1`, owner).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	stmts := [][]any{{`INSERT INTO services (id, slug, name, service_endpoint, owner, created_at, updated_at) VALUES ($1, $2, $2, $3, $4, $5, $5)`,
		id, slug, "https://" + slug + ".example", owner, now}}
	if n == 0 {
		stmts = append([][]any{
			{`INSERT INTO accounts (id, created_at) VALUES ($1, $2)`, "usr_" + owner, now},
			{`INSERT INTO namespaces (namespace, owner_id, created_at, updated_at) VALUES ($1, $2, $3, $3)`, owner, "usr_" + owner, now},
		}, stmts...)
	}
	for _, s := range stmts {
		if _, err := db.Exec(ctx, s[0].(string), s[1:]...); err != nil {
			tb.Fatal(err)
		}
	}
}

// testOwner stands in for the owner sessions of the composition: it
// admits the namespace named in X-Owner.
func testOwner(next web.OwnerHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ns := r.Header.Get("X-Owner")
		if ns == "" {
			apierror.Write(w, r, web.ErrUnauthenticated)
			return
		}
		next(w, r, ns)
	})
}

// world is a Manager serving its routes over a database with the
// services acme/github (svc_github) and bob/slack (svc_slack).
type world struct {
	t      *testing.T
	db     *sqldb.DB
	m      *webhooks.Manager
	url    string
	offset atomic.Int64 // added to the clock
}

func newWorld(t *testing.T, db *sqldb.DB, cfg webhooks.Config, alertTo webhooks.AlertAddress) *world {
	t.Helper()
	w := &world{t: t, db: db}
	kit := &web.Kit{Log: slog.New(slog.DiscardHandler), MaxBodyBytes: 1 << 20,
		Clock: func() time.Time { return time.Now().Add(time.Duration(w.offset.Load())) }}
	m, err := webhooks.New(cfg, webhooks.Deps{DB: db, Kit: kit, Owner: testOwner, AlertTo: alertTo})
	if err != nil {
		t.Fatal(err)
	}
	w.m = m
	mux := http.NewServeMux()
	m.Routes(mux)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	w.url = ts.URL
	return w
}

// seeded is a world on db with both services.
func seeded(t *testing.T, db *sqldb.DB, cfg webhooks.Config, alertTo webhooks.AlertAddress) *world {
	seedService(t, db, "acme", "svc_github", "github")
	seedService(t, db, "bob", "svc_slack", "slack")
	return newWorld(t, db, cfg, alertTo)
}

// answer is a response, its body read.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (w *world) do(method, path, owner string, body any) answer {
	w.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, w.url+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if owner != "" {
		req.Header.Set("X-Owner", owner)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, header: res.Header, body: b}
}

// want fails unless the answer has status and, when code is not "", the
// error code.
func (a answer) want(t *testing.T, status int, code string) answer {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d: %s", a.status, status, a.body)
	}
	if code != "" && !strings.Contains(string(a.body), `"`+code+`"`) {
		t.Fatalf("body %s, want code %s", a.body, code)
	}
	return a
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("%v: %s", err, a.body)
	}
	return m
}

func (w *world) deliverDue() int {
	w.t.Helper()
	n, err := w.m.DeliverDue(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

// payload is the Standard Webhooks body as a receiver reads it.
type payload struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      struct {
		ClaimID   string `json:"claim_id"`
		Namespace string `json:"namespace"`
		Service   string `json:"service"`
	} `json:"data"`
}

// receiver is a webhook endpoint that verifies Standard Webhooks
// signatures independently of the sender's code and keeps what it
// accepted by webhook-id; while down it answers 503.
type receiver struct {
	url    string
	down   atomic.Bool
	secret string
	mu     sync.Mutex
	got    map[string]payload
	bad    int
}

func newReceiver(t *testing.T, secret string) *receiver {
	rc := &receiver{secret: secret, got: map[string]payload{}}
	ts := httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(ts.Close)
	rc.url = ts.URL
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	if rc.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	body, _ := io.ReadAll(r.Body)
	id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(rc.secret, "whsec_"))
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var p payload
	if r.Header.Get("webhook-signature") != "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)) || json.Unmarshal(body, &p) != nil {
		rc.bad++
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	rc.got[id] = p
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) received() (map[string]payload, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string]payload{}
	for k, v := range rc.got {
		out[k] = v
	}
	return out, rc.bad
}
