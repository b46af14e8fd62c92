package controlplane

import (
	"context"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"maps"
	mathrand "math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/feedwire"
)

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

// syncFeedHTTP applies the changes after cursor, read through the API two
// at a time, to m, showing each to seen, and returns the new cursor.
func syncFeedHTTP(t *testing.T, feed func(string) resp, m feedModel, cursor string, seen ...func(map[string]any)) string {
	t.Helper()
	for {
		a := feed("?limit=2&since="+cursor).want(t, 200, "").json(t)
		for _, c := range a["changes"].([]any) {
			c := c.(map[string]any)
			for _, f := range seen {
				f(c)
			}
			if c["service"] != "github" || c["namespace"] != "acme" || c["public_key"] == "" {
				t.Fatalf("change %v", c)
			}
			if _, has := c["approved_at"]; has != (c["op"] == "upsert") {
				t.Fatalf("change %v: approved_at belongs to upserts only", c)
			}
			m.apply(c["op"].(string), c["namespace"].(string), c["public_key"].(string), c["claim_id"].(string))
		}
		cursor = a["cursor"].(string)
		if a["more"] == false {
			return cursor
		}
	}
}

// seedClaims inserts n claims of service github in namespace acme with the
// given status and returns their ids.
func seedClaims(t testing.TB, st *Store, n int, status string) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		c, err := st.insertSeedClaim(context.Background(), Claim{Namespace: "acme", PublicKey: pubKey(newAgent(t, "acme")),
			Service: "github", Status: status}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = c.ID
	}
	return ids
}

func TestFeedChanges(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		owner, key := claimWorld(e)
		st := e.st
		approved := seedClaims(t, st, 3, StatusApproved)
		pending := seedClaims(t, st, 3, StatusPending)
		feed := func(q string) resp {
			return e.signed("GET", "/v1/namespaces/claims"+q, nil, withKey(key))
		}
		first := feed("?limit=2").want(t, 200, "").json(t)
		cursor := first["cursor"].(string)
		held, _ := fullFeed(t, st, "github")

		// Nothing changed: the cursor stays.
		m := feed("?since="+cursor).want(t, 200, "").json(t)
		if len(m["changes"].([]any)) != 0 || m["cursor"] != cursor || m["more"] != false {
			t.Fatalf("unchanged feed: %v", m)
		}

		e.do("POST", "/v1/claims/"+pending[0]+"/approve", nil, owner).want(t, 200, "")
		e.do("POST", "/v1/claims/"+pending[1]+"/reject", nil, owner).want(t, 200, "") // not in the feed: no change
		e.do("POST", "/v1/claims/"+approved[0]+"/revoke", nil, owner).want(t, 200, "")
		e.do("POST", "/v1/claims/"+pending[2]+"/approve", nil, owner).want(t, 200, "")
		e.do("POST", "/v1/claims/"+pending[2]+"/revoke", nil, owner).want(t, 200, "")

		var ops []string
		cursor = syncFeedHTTP(t, feed, held, cursor, func(c map[string]any) { ops = append(ops, c["op"].(string)+" "+c["claim_id"].(string)) })
		want := []string{"upsert " + pending[0], "delete " + approved[0], "upsert " + pending[2], "delete " + pending[2]}
		if strings.Join(ops, ",") != strings.Join(want, ",") {
			t.Fatalf("changes %v, want %v", ops, want)
		}
		if full, _ := fullFeed(t, st, "github"); !maps.Equal(held, full) {
			t.Fatalf("synced %v, full read %v", held, full)
		}

		t.Run("paging after a claim skips none when an earlier one is revoked", func(t *testing.T) {
			first := feed("?limit=2").want(t, 200, "").json(t)["claims"].([]any)
			last := first[1].(map[string]any)["claim_id"].(string)
			e.do("POST", "/v1/claims/"+first[0].(map[string]any)["claim_id"].(string)+"/revoke", nil, owner).want(t, 200, "")
			full, _ := fullFeed(t, st, "github")
			rest := feed("?limit=100&after="+last).want(t, 200, "").json(t)["claims"].([]any)
			if len(rest) != len(full)-1 {
				t.Fatalf("after %s: %d claims, want %d", last, len(rest), len(full)-1)
			}
			feed("?after=clm_nope").want(t, 400, "VALIDATION_ERROR")
			feed("?after="+last+"&offset=2").want(t, 400, "VALIDATION_ERROR")
			feed("?after="+pending[1]).want(t, 400, "VALIDATION_ERROR") // rejected, never in the feed
			cursor = syncFeedHTTP(t, feed, held, cursor)
		})
		t.Run("bad cursors", func(t *testing.T) {
			feed("?since=").want(t, 400, "VALIDATION_ERROR")
			feed("?since=-1").want(t, 400, "VALIDATION_ERROR")
			feed("?since=01").want(t, 400, "VALIDATION_ERROR")
			feed("?since=1&offset=0").want(t, 400, "VALIDATION_ERROR")
			feed("?since=1&limit=0").want(t, 400, "VALIDATION_ERROR")
			// A cursor this database never issued (another database's, or
			// from before a restore) is not trusted to be complete.
			feed("?since=999999").want(t, 410, "FEED_CURSOR_EXPIRED")
		})
		t.Run("service deletion revokes through the feed", func(t *testing.T) {
			var svcID string
			if err := st.db.QueryRowContext(context.Background(), `SELECT id FROM services WHERE slug = 'github'`).Scan(&svcID); err != nil {
				t.Fatal(err)
			}
			held := maps.Clone(held)
			c0, _ := feedwire.ParseCursor(cursor)
			if _, _, err := st.deleteService(context.Background(), "acme", svcID, time.Now()); err != nil {
				t.Fatal(err)
			}
			syncFeed(t, st, "github", held, c0)
			if len(held) != 0 {
				t.Fatalf("after deleting the service the feed still holds %v", held)
			}
		})
		t.Run("pruned cursor expires", func(t *testing.T) {
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
	})
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
	cfg := storeConfig(t, ProviderPostgres)
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
			st.Close()
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

// fullRead hides ClaimChanges: a Cache over it reads every claim on each
// refresh, the reference the syncing one must match.
type fullRead struct{ src *claimcache.HTTPSource }

func (f fullRead) ApprovedClaims(ctx context.Context, service, version string, add func(claimcache.Claim) error) (string, error) {
	return f.src.ApprovedClaims(ctx, service, version, add)
}

// TestClaimCacheConvergesOnFeed: the gateway's claims cache, syncing by
// changes from this control plane, holds after every round of random
// approvals and revocations exactly what a cache that reads every claim
// holds, on both engines.
func TestClaimCacheConvergesOnFeed(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, openStore(t, storeConfig(t, engine)), func(c *Config) { c.SignedRatePerMinute = 1 << 20 })
			_, key := claimWorld(e)
			agents := make([]*identity.Identity, 30)
			ids := make([]string, len(agents))
			for i := range agents {
				agents[i] = newAgent(t, "acme")
				c, err := e.st.insertSeedClaim(t.Context(), Claim{Namespace: "acme", PublicKey: pubKey(agents[i]), Service: "github", Status: StatusPending}, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				ids[i] = c.ID
			}
			src := &claimcache.HTTPSource{BaseURL: e.ts.URL, Client: &http.Client{Transport: e.agent.Transport(nil, identity.SignOptions{})},
				APIKey: func(string) (string, error) { return key, nil }, PageSize: 3}
			caches := make([]*claimcache.Cache, 2)
			for i, s := range []claimcache.Source{src, fullRead{src}} {
				c, err := claimcache.New(claimcache.Config{Source: s, Services: []string{"github"}})
				if err != nil {
					t.Fatal(err)
				}
				caches[i] = c
			}
			rng := mathrand.New(mathrand.NewPCG(3, 4))
			held := 0
			defer func() {
				if held == 0 {
					t.Error("no round held a claim: the test proved nothing")
				}
			}()
			for round := range 12 {
				for range rng.IntN(6) {
					i := rng.IntN(len(ids))
					now := time.Now()
					action := "approve"
					if c, err := e.st.latestClaim(t.Context(), "acme", pubKey(agents[i]), "github"); err == nil && c.Status == StatusApproved {
						action = "revoke"
					} else if err == nil && c.Status == StatusRevoked {
						nc, err := e.st.insertSeedClaim(t.Context(), Claim{Namespace: "acme", PublicKey: pubKey(agents[i]), Service: "github", Status: StatusPending}, now)
						if err != nil {
							t.Fatal(err)
						}
						ids[i] = nc.ID
					}
					if _, err := e.st.transition(t.Context(), "acme", ids[i], action, now.Add(-time.Hour), now); err != nil {
						t.Fatal(err)
					}
				}
				for _, c := range caches {
					if err := c.Refresh(t.Context(), "github"); err != nil {
						t.Fatal(err)
					}
				}
				if a, b := caches[0].Status("github").Claims, caches[1].Status("github").Claims; a != b {
					t.Fatalf("round %d: %d claims synced, %d read", round, a, b)
				}
				held = max(held, caches[0].Status("github").Claims)
				for _, a := range agents {
					x, errX := caches[0].Lookup("github", "acme", a.PublicKey)
					y, errY := caches[1].Lookup("github", "acme", a.PublicKey)
					if x != y || (errX == nil) != (errY == nil) {
						t.Fatalf("round %d: synced %+v %v, read %+v %v", round, x, errX, y, errY)
					}
				}
			}
		})
	}
}
