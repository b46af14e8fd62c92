package claims

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane/internal/signed"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/sqldb/sqldbtest"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/clientip"
)

// The claims' own tests run on a store of either engine, without the rest
// of the control plane; the HTTP-level ones live with the composition.

var engines = sqldbtest.Engines

// Schema versions of the migrations whose upgrades tests check.
const (
	claimCountsVersion = 11
	feedChangesVersion = 12
)

var (
	feedBenchClaims = flag.Int("feed-claims", 100_000, "approved claims seeded by BenchmarkFeedChanges")
)

func storeConfig(tb testing.TB, engine string) sqldb.Config { return sqldbtest.Config(tb, engine) }

// openStore opens the claims store of a fresh database of cfg.
func openStore(tb testing.TB, cfg sqldb.Config) *Store {
	tb.Helper()
	return openStoreAt(tb, cfg, sqldb.Version())
}

// openStoreAt opens a store whose schema stops at version, as an older
// release left it; its submissions are prepared only at the current one.
func openStoreAt(tb testing.TB, cfg sqldb.Config, version int) *Store {
	tb.Helper()
	db, err := sqldb.OpenAt(context.Background(), cfg, version)
	if err != nil {
		tb.Fatalf("open %s store: %v", cfg.Provider, err)
	}
	tb.Cleanup(func() { db.Close() })
	st := &Store{db: db}
	if version == sqldb.Version() {
		if err := st.prepareSubmit(context.Background()); err != nil {
			tb.Fatal(err)
		}
	}
	return st
}

// rawDB is a second pool on the store's database, for tests that hold a
// transaction of their own open.
func rawDB(tb testing.TB, cfg sqldb.Config) *sql.DB {
	tb.Helper()
	driver, dsn := "sqlite", "file:"+cfg.SQLitePath
	if cfg.Provider == sqldb.ProviderPostgres {
		driver, dsn = "pgx", cfg.DatabaseURL
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// testKit is the plumbing of a test handler.
func testKit() *web.Kit {
	return &web.Kit{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: time.Now, MaxBodyBytes: 1 << 20}
}

// newHandler serves the claims routes over st, signed requests admitted
// without a rate limit; owner routes are not served.
func newHandler(tb testing.TB, st *Store) http.Handler {
	tb.Helper()
	kit := testKit()
	kit.Proxy = clientip.Resolver{}
	gate, err := signed.New(signed.Config{RatePerMinute: 1 << 30}, st.db, kit)
	if err != nil {
		tb.Fatal(err)
	}
	noOwner := func(web.OwnerHandler) http.Handler { return http.NotFoundHandler() }
	mux := http.NewServeMux()
	New(Config{}, st, kit, gate, noOwner, nil, Hooks{}).Routes(mux)
	return mux
}

// newKey is the text form of a fresh agent public key.
func newKey() string {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	return identity.FormatPublicKey(pub)
}

// seedClaims inserts n claims of service github in namespace acme with the
// given status and returns their ids.
func seedClaims(t testing.TB, st *Store, n int, status string) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		c, err := st.insertSeedClaim(context.Background(), Claim{Namespace: "acme", PublicKey: newKey(),
			Service: "github", Status: status}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = c.ID
	}
	return ids
}

// populateFeed inserts n approved claims of service "github" in namespace
// "acme" in multi-row batches, and returns a key of the service.
func populateFeed(tb testing.TB, st *Store, n int) string {
	tb.Helper()
	ctx := context.Background()
	now := time.Now()
	if err := st.ensureNamespace(ctx, "acme", now); err != nil {
		tb.Fatal(err)
	}
	_, key, err := st.createService(ctx, "acme", "GitHub", "https://gh.example", "github", DefaultMaxServices, now)
	if err != nil {
		tb.Fatal(err)
	}
	const batch = 500
	for start := 0; start < n; start += batch {
		var (
			rows []string
			args []any
		)
		for i := start; i < min(start+batch, n); i++ {
			at := sqldb.Micros(now) + int64(i)
			p := len(args)
			rows = append(rows, fmt.Sprintf("($%d, 'acme', $%d, 'github', '127.0.0.1', 'alice', '', '', 'approved', $%d, $%d, $%d)", p+1, p+2, p+3, p+3, p+3))
			args = append(args, sqldb.NewID("clm_"), newKey(), at)
		}
		if _, err := st.db.Exec(ctx, `INSERT INTO claims (id, namespace, public_key, service, agent_ip, subject, agent_id, agent_name, status, created_at, updated_at, approved_at)
			VALUES `+strings.Join(rows, ", "), args...); err != nil {
			tb.Fatal(err)
		}
	}
	if st.db.PG() {
		st.db.Exec(ctx, `ANALYZE claims`)
	}
	return key.Key
}

// seedFeedClaims is populateFeed with the change log pruned to its
// retention, as a control plane in its steady state holds it.
func seedFeedClaims(tb testing.TB, st *Store, n int) string {
	tb.Helper()
	key := populateFeed(tb, st, n)
	if _, err := st.pruneFeedChanges(context.Background(), time.Now().Add(-feedChangesMaxAge), feedChangesKeep); err != nil {
		tb.Fatal(err)
	}
	return key
}

// churn makes n changes of the feed of "github", alternately approving a
// new claim and revoking it, so the changes mix upserts and deletes.
func churn(tb testing.TB, st *Store, n int) {
	tb.Helper()
	ctx := context.Background()
	var c Claim
	for i := range n {
		now := time.Now()
		action := "revoke"
		if i%2 == 0 {
			var err error
			if c, err = st.insertSeedClaim(ctx, Claim{Namespace: "acme", PublicKey: newKey(), Service: "github", Status: StatusPending}, now); err != nil {
				tb.Fatal(err)
			}
			action = "approve"
		}
		if _, err := st.transition(ctx, "acme", c.ID, action, now.Add(-time.Hour), now); err != nil {
			tb.Fatal(err)
		}
	}
}

// feedModel is what a gateway holds: tuple (namespace, public key) → claim id.
type feedModel map[string]string

func (m feedModel) apply(op, ns, pub, id string) {
	k := ns + " " + pub
	switch {
	case op == feedOpUpsert:
		m[k] = id
	case m[k] == id:
		delete(m, k)
	}
}

// fullFeed reads every approved claim of slug the way a client does: the
// cursor first, then the pages.
func fullFeed(t testing.TB, st *Store, slug string) (feedModel, int64) {
	t.Helper()
	_, cursor, err := st.feedState(context.Background(), slug)
	if err != nil {
		t.Fatal(err)
	}
	m := feedModel{}
	var after *feedCursor
	for {
		p, err := st.feed(context.Background(), slug, after, 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Claims {
			m.apply(feedOpUpsert, c.Namespace, c.PublicKey, c.ID)
		}
		if !p.HasMore {
			return m, cursor
		}
		last := p.Claims[len(p.Claims)-1]
		after = &feedCursor{approvedAt: sqldb.Micros(last.ApprovedAt), id: last.ID}
	}
}

// syncFeed applies the changes after cursor to m and returns the new cursor.
func syncFeed(t testing.TB, st *Store, slug string, m feedModel, cursor int64) int64 {
	t.Helper()
	for {
		changes, more, err := st.feedChanges(context.Background(), slug, cursor, 7)
		if err != nil {
			t.Fatalf("changes after %d: %v", cursor, err)
		}
		for _, ch := range changes {
			if ch.Seq != cursor+1 {
				t.Fatalf("change %d follows %d: a hole in the log", ch.Seq, cursor)
			}
			m.apply(ch.Op, ch.Claim.Namespace, ch.Claim.PublicKey, ch.Claim.ID)
			cursor = ch.Seq
		}
		if !more {
			return cursor
		}
	}
}

// TestFeedChangesConcurrent approves and revokes claims from many
// goroutines while a reader follows the changes with its cursor; the
// reader must end with exactly the full feed, so no change committed late
// was skipped.
func TestFeedChangesConcurrent(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, storeConfig(t, engine))
			populateFeed(t, st, 50)
			pending := seedClaims(t, st, 120, StatusPending)
			held, cursor := fullFeed(t, st, "github")

			ctx := context.Background()
			done := make(chan struct{})
			var reader sync.WaitGroup
			reader.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
						cursor = syncFeed(t, st, "github", held, cursor)
					}
				}
			})
			var writers sync.WaitGroup
			for w := range 6 {
				writers.Go(func() {
					for i := w; i < len(pending); i += 6 {
						now := time.Now()
						if _, err := st.transition(ctx, "acme", pending[i], "approve", now.Add(-time.Hour), now); err != nil {
							t.Error(err)
							return
						}
						if i%3 == 0 {
							if _, err := st.transition(ctx, "acme", pending[i], "revoke", now.Add(-time.Hour), now); err != nil {
								t.Error(err)
								return
							}
						}
					}
				})
			}
			writers.Wait()
			close(done)
			reader.Wait()
			cursor = syncFeed(t, st, "github", held, cursor)
			full, _ := fullFeed(t, st, "github")
			if !maps.Equal(held, full) || len(full) != 50+80 {
				t.Fatalf("synced %d claims, full read %d (want 130)", len(held), len(full))
			}
		})
	}
}

// TestFeedChangesCommitOrder: on PostgreSQL a change's number is taken
// under the service's feed_state row lock, held to commit, so a second
// change cannot take the next number (and commit) before the first
// commits. A reader therefore never passes a number whose change is still
// to commit.
func TestFeedChangesCommitOrder(t *testing.T) {
	t.Parallel()
	cfg := storeConfig(t, sqldb.ProviderPostgres)
	st := openStore(t, cfg)
	populateFeed(t, st, 1)
	ids := seedClaims(t, st, 2, StatusPending)
	_, before, _ := st.feedState(context.Background(), "github")
	ctx := context.Background()
	raw := rawDB(t, cfg)

	slow, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback()
	approve := `UPDATE claims SET status = 'approved', approved_at = $2, updated_at = $2 WHERE id = $1`
	if _, err := slow.ExecContext(ctx, approve, ids[0], sqldb.Micros(time.Now())); err != nil {
		t.Fatal(err)
	}
	// The uncommitted change is invisible, and holds its number.
	if ch, _, err := st.feedChanges(ctx, "github", before, 10); err != nil || len(ch) != 0 {
		t.Fatalf("changes while the first is uncommitted: %v, %v", ch, err)
	}
	fast, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Rollback()
	if _, err := fast.ExecContext(ctx, `SET LOCAL lock_timeout = '50ms'`); err != nil {
		t.Fatal(err)
	}
	if _, err := fast.ExecContext(ctx, approve, ids[1], sqldb.Micros(time.Now())); err == nil || !strings.Contains(err.Error(), "lock timeout") {
		t.Fatalf("a second change took a number while the first was open: %v", err)
	}
	fast.Rollback()
	if err := slow.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.db.Exec(ctx, approve, ids[1], sqldb.Micros(time.Now())); err != nil {
		t.Fatal(err)
	}
	ch, _, err := st.feedChanges(ctx, "github", before, 10)
	if err != nil || len(ch) != 2 || ch[0].Claim.ID != ids[0] || ch[0].Seq != before+1 || ch[1].Claim.ID != ids[1] || ch[1].Seq != before+2 {
		t.Fatalf("changes %+v, %v", ch, err)
	}
}

// TestFeedChangesUpgrade: a database made before the change log serves
// its existing claims through the full feed, and the changes after it.
func TestFeedChangesUpgrade(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			cfg := storeConfig(t, engine)
			st := openStoreAt(t, cfg, feedChangesVersion-1)
			populateFeed(t, st, 3)
			st.db.Close()
			st = openStore(t, cfg)
			held, cursor := fullFeed(t, st, "github")
			if len(held) != 3 || cursor != 3 {
				t.Fatalf("after upgrade: %d claims at cursor %d", len(held), cursor)
			}
			if _, _, err := st.feedChanges(context.Background(), "github", 0, 10); err != errFeedCursorExpired {
				t.Fatalf("cursor from before the log: %v", err)
			}
			id := seedClaims(t, st, 1, StatusApproved)[0]
			syncFeed(t, st, "github", held, cursor)
			if len(held) != 4 || !strings.Contains(fmt.Sprint(held), id) {
				t.Fatalf("synced %v", held)
			}
		})
	}
}

// TestFeedChangesReadsAnIndexRange: the read of the changes after a cursor
// is a range of the change log's primary key and one claim lookup per
// change, never a scan of the log or of the claims, on both engines.
func TestFeedChangesReadsAnIndexRange(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			cfg := storeConfig(t, engine)
			st := openStore(t, cfg)
			populateFeed(t, st, 200)
			explain, scan := `EXPLAIN QUERY PLAN `, "SCAN "
			tx, err := rawDB(t, cfg).Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if st.db.PG() {
				// A table this small is cheaper to scan; with scans priced
				// out, the plan shows whether an index serves the range.
				explain, scan = `EXPLAIN `, "Seq Scan"
				if _, err := tx.Exec(`SET LOCAL enable_seqscan = off`); err != nil {
					t.Fatal(err)
				}
			}
			rows, err := tx.Query(explain+`SELECT f.seq, c.approved_at FROM feed_changes f LEFT JOIN claims c ON c.id = f.claim_id
				WHERE f.service = $1 AND f.seq > $2 ORDER BY f.seq LIMIT $3`, "github", 190, 100)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				cols, _ := rows.Columns()
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				rows.Scan(ptrs...)
				plan = append(plan, fmt.Sprint(vals[len(vals)-1]))
			}
			if p := strings.Join(plan, "\n"); strings.Contains(p, scan) {
				t.Fatalf("the changes read scans:\n%s", p)
			}
		})
	}
}

// countRows reads q's (key…, n) rows as "key/…" → n, leaving out zeros.
func countRows(t *testing.T, st *Store, q string) map[string]int64 {
	t.Helper()
	rows, err := st.db.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var a, b, c string
		var n int64
		if err := rows.Scan(&a, &b, &c, &n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			out[a+"/"+b+"/"+c] = n
		}
	}
	return out
}

// checkCounts fails unless the counters equal a count of the claims.
func checkCounts(t *testing.T, st *Store, when string) {
	t.Helper()
	for _, c := range []struct{ kept, counted string }{
		{`SELECT namespace, service, status, n FROM claim_counts`,
			`SELECT namespace, service, status, COUNT(*) FROM claims GROUP BY namespace, service, status`},
		{`SELECT namespace, service, agent_net, n FROM pending_agents`,
			`SELECT namespace, service, agent_net, COUNT(*) FROM claims WHERE status = 'pending' GROUP BY namespace, service, agent_net`},
	} {
		kept, counted := countRows(t, st, c.kept), countRows(t, st, c.counted)
		if !maps.Equal(kept, counted) {
			t.Fatalf("%s: counters %v, claims %v", when, kept, counted)
		}
	}
}

// TestClaimCountsFollowEveryChange: the counters that the claims page, the
// listing's total and the pending budgets read are filled in when an
// existing database is upgraded, and then follow every way a claim is
// created, changes status or goes.
func TestClaimCountsFollowEveryChange(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cfg := storeConfig(t, engine)
			now := time.Now()

			// A database of the release before the counters, with claims.
			old := openStoreAt(t, cfg, claimCountsVersion-1)
			db := old.db
			for _, ns := range []string{"acme", "bob"} {
				if err := old.ensureNamespace(ctx, ns, now); err != nil {
					t.Fatal(err)
				}
			}
			for i, status := range []string{"pending", "pending", "pending", "approved", "revoked", "rejected", "expired", "pending"} {
				ns, svc := "acme", []string{"github", "slack"}[i%2]
				if i == 7 {
					ns = "bob"
				}
				if _, err := db.Exec(ctx, `INSERT INTO claims (id, namespace, public_key, service, agent_ip, agent_net, subject, agent_id, agent_name, status, created_at, updated_at)
					VALUES ($1, $2, $3, $4, '192.0.2.1', '192.0.2.1', '', '', '', $5, $6, $6)`,
					fmt.Sprintf("clm_old%d", i), ns, fmt.Sprintf("ed25519:old%d", i), svc, status, sqldb.Micros(now)); err != nil {
					t.Fatal(err)
				}
			}
			old.db.Close()

			st := openStore(t, cfg)
			checkCounts(t, st, "after the upgrade")

			budget := pendingBudget{perService: 100, perAgent: 100}
			var submitted []Claim
			for i, ip := range []string{"192.0.2.1", "192.0.2.2", "2001:db8::1", ""} {
				c, created, err := st.submitClaim(ctx, Claim{Namespace: "acme", PublicKey: fmt.Sprintf("ed25519:new%d", i), Service: "github", AgentIP: ip},
					budget, now.Add(-time.Hour), now)
				if err != nil || !created {
					t.Fatalf("submit: %v, created %v", err, created)
				}
				submitted = append(submitted, c)
			}
			checkCounts(t, st, "after submissions")
			for _, step := range []struct{ id, action string }{{submitted[0].ID, "approve"}, {submitted[1].ID, "reject"}, {submitted[0].ID, "revoke"}} {
				if _, err := st.transition(ctx, "acme", step.id, step.action, now.Add(-time.Hour), now); err != nil {
					t.Fatalf("%s: %v", step.action, err)
				}
				checkCounts(t, st, "after "+step.action)
			}
			if _, err := st.rejectPending(ctx, "acme", "slack", now.Add(-time.Hour), now); err != nil {
				t.Fatal(err)
			}
			checkCounts(t, st, "after reject-pending")
			if _, err := st.expirePending(ctx, now.Add(time.Second), now); err != nil {
				t.Fatal(err)
			}
			checkCounts(t, st, "after expiry")
			// A stale pending claim expired by a submission of its service.
			if _, _, err := st.submitClaim(ctx, Claim{Namespace: "bob", PublicKey: "ed25519:late", Service: "slack", AgentIP: "192.0.2.9"},
				budget, now.Add(time.Second), now); err != nil {
				t.Fatal(err)
			}
			checkCounts(t, st, "after an expiring submission")
			if _, err := st.db.Exec(context.Background(), `DELETE FROM claims WHERE namespace = 'acme' AND service = 'github'`); err != nil {
				t.Fatal(err)
			}
			checkCounts(t, st, "after deletes")
		})
	}
}

// BenchmarkFeedChanges measures a refresh of a gateway that holds the feed
// at a cursor k changes old, for k = 0, 1, 10 and 100, on a feed of
// -feed-claims approved claims: in the store (the change-log read) and
// through the handler (signature, key, nonce and JSON included). Its
// cost follows k; run it with two sizes of feed to see it does not follow
// the feed's size.
func BenchmarkFeedChanges(b *testing.B) {
	for _, engine := range engines {
		b.Run(engine, func(b *testing.B) {
			st := openStore(b, storeConfig(b, engine))
			key := seedFeedClaims(b, st, *feedBenchClaims)
			const logged = 2000
			churn(b, st, logged)
			_, head, err := st.feedState(b.Context(), "github")
			if err != nil {
				b.Fatal(err)
			}
			srv := newHandler(b, st)
			agent, _ := identity.New("gateway")
			for _, k := range []int{0, 1, 10, 100} {
				// Cursors spread over the log, each reading the k changes
				// after it (a page of k); k = 0 is a gateway up to date.
				limit := max(k, 1)
				cursor := func(i int) int64 {
					if k == 0 {
						return head
					}
					return head - int64(k) - int64(i%(logged-k))
				}
				b.Run(fmt.Sprintf("store/k=%d", k), func(b *testing.B) {
					i := 0
					for b.Loop() {
						ch, _, err := st.feedChanges(b.Context(), "github", cursor(i), limit)
						if err != nil || len(ch) != k {
							b.Fatalf("%d changes, %v", len(ch), err)
						}
						i++
					}
					b.ReportMetric(float64(k), "changes/op")
				})
				b.Run(fmt.Sprintf("handler/k=%d", k), func(b *testing.B) {
					i := 0
					for b.Loop() {
						req := httptest.NewRequest("GET", fmt.Sprintf("http://cp.test/v1/namespaces/claims?limit=%d&since=%d", limit, cursor(i)), nil)
						req.RequestURI = req.URL.RequestURI()
						req.Header.Set("Authorization", "Bearer "+key)
						if err := agent.Sign(req, identity.SignOptions{}); err != nil {
							b.Fatal(err)
						}
						w := httptest.NewRecorder()
						srv.ServeHTTP(w, req)
						if w.Code != 200 {
							b.Fatalf("%d %s", w.Code, w.Body)
						}
						i++
					}
				})
			}
		})
	}
}

// TestFeedChangesPrune: a cursor whose changes were pruned expires; the
// last change is kept by count, and the current cursor stays valid when
// everything goes by age.
func TestFeedChangesPrune(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, storeConfig(t, engine))
			populateFeed(t, st, 3)
			churn(t, st, 4)
			n, err := st.pruneFeedChanges(context.Background(), time.Now().Add(-time.Hour), 1)
			if err != nil || n == 0 {
				t.Fatalf("pruned %d, %v", n, err)
			}
			if _, _, err := st.feedChanges(context.Background(), "github", 0, 10); err != errFeedCursorExpired {
				t.Fatalf("cursor 0 after pruning: %v", err)
			}
			_, version, _ := st.feedState(context.Background(), "github")
			if _, _, err := st.feedChanges(context.Background(), "github", version-1, 10); err != nil {
				t.Fatalf("the last change was kept: %v", err)
			}
			// By age: everything goes, the current cursor stays valid.
			if _, err := st.pruneFeedChanges(context.Background(), time.Now().Add(time.Hour), 1<<40); err != nil {
				t.Fatal(err)
			}
			if ch, _, err := st.feedChanges(context.Background(), "github", version, 10); err != nil || len(ch) != 0 {
				t.Fatalf("current cursor after pruning all: %v, %v", ch, err)
			}
		})
	}
}

// BenchmarkFeedOffsetPaging reads the feed of 100,000 claims with plain
// offset paging (no remembered cursor), the worst case of a client that
// jumps around or alternates between instances, in ms per page of 2,000.
func BenchmarkFeedOffsetPaging(b *testing.B) {
	const total, pageSize = 100_000, 2_000
	pages := total / pageSize
	for _, engine := range engines {
		b.Run(engine, func(b *testing.B) {
			st := openStore(b, storeConfig(b, engine))
			populateFeed(b, st, total)
			start := time.Now()
			for b.Loop() {
				for off := 0; off < total; off += pageSize {
					p, err := st.feed(b.Context(), "github", nil, pageSize, off)
					if err != nil || len(p.Claims) != pageSize {
						b.Fatalf("page at %d: %d, %v", off, len(p.Claims), err)
					}
				}
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N*pages), "ms/page")
		})
	}
}
