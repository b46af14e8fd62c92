package controlplane

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/claims"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/sqldb/sqldbtest"
	"github.com/idnhq/idn/controlplane/internal/web"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/openapicheck"
)

// engines lists the storage engines every store test runs against.
var engines = sqldbtest.Engines

// storeConfig returns a configuration for a fresh, isolated database of
// the engine (see sqldbtest.Config).
func storeConfig(tb testing.TB, engine string) StoreConfig { return sqldbtest.Config(tb, engine) }

func openStore(tb testing.TB, cfg StoreConfig) *Store {
	tb.Helper()
	st, err := Open(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("open %s store: %v", cfg.Provider, err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// claimsAPI is the claims API over st, which tests set their data up
// through as an embedder would.
func claimsAPI(st *Store) *claims.Core {
	kit := &web.Kit{Log: slog.New(slog.DiscardHandler), Clock: time.Now}
	return claims.New(claims.Config{MaxServices: 1 << 20}, st.claims, kit, nil, nil, nil, claims.Hooks{})
}

// feedHead reads the approved claims and the version of slug's feed.
func feedHead(tb testing.TB, st *Store, slug string) (approved, version int64) {
	tb.Helper()
	err := st.db.QueryRowContext(context.Background(), `SELECT approved, version FROM feed_state WHERE service = $1`, slug).Scan(&approved, &version)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		tb.Fatal(err)
	}
	return approved, version
}

// move applies an owner's action (approve, reject, revoke) to claim id
// in the database itself, for tests that change many claims fast.
func move(tb testing.TB, st *Store, id, action string) {
	tb.Helper()
	status, column := map[string][2]string{"approve": {StatusApproved, "approved_at"}, "reject": {StatusRejected, "rejected_at"},
		"revoke": {StatusRevoked, "revoked_at"}}[action][0], map[string]string{"approve": "approved_at", "reject": "rejected_at", "revoke": "revoked_at"}[action]
	now := sqldb.Micros(time.Now())
	if _, err := st.db.Exec(context.Background(), `UPDATE claims SET status = $2, `+column+` = $3, updated_at = $3 WHERE id = $1`, id, status, now); err != nil {
		tb.Fatal(err)
	}
}

// sha256Hex is the hex SHA-256 of s, as tokens are stored.
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// latestStatus is the status of the live claim of a tuple, else of its
// newest one.
func latestStatus(tb testing.TB, st *Store, ns, pub, slug string) string {
	tb.Helper()
	var status string
	err := st.db.QueryRowContext(context.Background(), `SELECT status FROM claims WHERE namespace = $1 AND public_key = $2 AND service = $3
		ORDER BY CASE WHEN status IN ('pending', 'approved') THEN 0 ELSE 1 END, updated_at DESC, id DESC LIMIT 1`, ns, pub, slug).Scan(&status)
	if err != nil {
		tb.Fatal(err)
	}
	return status
}

// forEachEngine runs fn as a parallel subtest per engine, each with a
// fresh store; fn must not share mutable state between its runs.
func forEachEngine(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			fn(t, newEnv(t, openStore(t, storeConfig(t, engine)), nil))
		})
	}
}

var testSecret = []byte("0123456789abcdef0123456789abcdef")

const seedToken = "seed-token-for-tests"

// env is one control plane on a real listener, with an agent identity
// that signs requests and a clock that tests can move forward.
type env struct {
	t      *testing.T
	st     *Store
	srv    *Server
	ts     *httptest.Server
	agent  *identity.Identity
	events *eventLog
	offset atomic.Int64 // added to time.Now by the server clock

	apiKeys  map[string]string // from the last claimWorld seed
	sessions map[string]string
}

type eventLog struct {
	ch chan Event
}

func (l *eventLog) Publish(_ context.Context, e Event) error {
	l.ch <- e
	return nil
}

// next returns the next published event, failing if none is pending.
func (l *eventLog) next(t *testing.T) Event {
	t.Helper()
	select {
	case e := <-l.ch:
		return e
	default:
		t.Fatal("no event published")
		return Event{}
	}
}

func newEnv(t *testing.T, st *Store, mod func(*Config)) *env {
	t.Helper()
	e := &env{t: t, st: st, events: &eventLog{ch: make(chan Event, 1000)}}
	cfg := Config{
		Store:            st,
		JWTSecret:        testSecret,
		AllowedOrigins:   []string{"http://localhost:8787"},
		TestSeedToken:    seedToken,
		Events:           e.events,
		Clock:            func() time.Time { return time.Now().Add(time.Duration(e.offset.Load())) },
		MaxPendingClaims: 3,
		MaxAPIKeys:       2,
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	e.ts = httptest.NewServer(openapicheck.Watch(t, srv))
	t.Cleanup(e.ts.Close)
	e.agent, err = identity.New("gateway-one")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// resp is a decoded answer.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("status %d, body %q: %v", r.status, r.body, err)
	}
	return m
}

// want asserts status and, when code is not "", the envelope code, and that
// every error envelope has request_id and error.
func (r resp) want(t *testing.T, status int, code string) resp {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	if code != "" {
		m := r.json(t)
		if m["code"] != code || m["request_id"] == "" || m["error"] == "" {
			t.Fatalf("envelope = %s, want code %s with error and request_id", r.body, code)
		}
	}
	return r
}

type reqOpt func(*http.Request)

func withHeader(k, v string) reqOpt { return func(r *http.Request) { r.Header.Set(k, v) } }

func withKey(key string) reqOpt { return withHeader("Authorization", "Bearer "+key) }

func withSession(tok string) reqOpt {
	return func(r *http.Request) { r.AddCookie(&http.Cookie{Name: SessionCookie, Value: tok}) }
}

// signedBy signs the request with id (after every other option applied).
func signedBy(id *identity.Identity, o identity.SignOptions) reqOpt {
	return func(r *http.Request) {
		if err := id.Sign(r, o); err != nil {
			panic(err)
		}
	}
}

// do sends a request to the server; body, when not nil, is JSON-encoded.
func (e *env) do(method, path string, body any, opts ...reqOpt) resp {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, o := range opts {
		o(req)
	}
	return e.send(req)
}

func (e *env) send(req *http.Request) resp {
	e.t.Helper()
	res, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// signed sends a request signed by the env's agent with a fresh nonce.
func (e *env) signed(method, path string, body any, opts ...reqOpt) resp {
	e.t.Helper()
	return e.do(method, path, body, append(opts, signedBy(e.agent, identity.SignOptions{}))...)
}

// seeded is what the seed endpoint answered.
type seeded struct {
	APIKeys  map[string]string `json:"api_keys"`
	Sessions map[string]string `json:"sessions"`
	Claims   []claims.Record   `json:"claims"`
}

// seed calls POST /v1/test/seed.
func (e *env) seed(body map[string]any) seeded {
	e.t.Helper()
	r := e.do("POST", "/v1/test/seed", body, withHeader("X-IDN-Test-Seed-Token", seedToken))
	r.want(e.t, http.StatusOK, "")
	var s seeded
	if err := json.Unmarshal(r.body, &s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// newAgentKey returns the wire form of a fresh agent key and the identity.
func newAgent(t testing.TB, ns string) *identity.Identity {
	t.Helper()
	id, err := identity.New(ns)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func pubKey(id *identity.Identity) string { return identity.FormatPublicKey(id.PublicKey) }

// deactivate tombstones a namespace the way account deletion will.
func (e *env) deactivate(ns string) {
	e.t.Helper()
	if _, err := e.st.db.Exec(context.Background(), `UPDATE namespaces SET deactivated_at = $1, updated_at = $1 WHERE namespace = $2`, sqldb.Micros(time.Now()), ns); err != nil {
		e.t.Fatal(err)
	}
}

// drainEvents discards pending events.
func (e *env) drainEvents() {
	for {
		select {
		case <-e.events.ch:
		default:
			return
		}
	}
}
