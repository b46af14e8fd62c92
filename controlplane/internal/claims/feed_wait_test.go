package claims

import (
	"context"
	"github.com/idnhq/idn/controlplane/internal/wake"
	"maps"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
)

// newCore is a Core over st that serves no route, for the calls a test
// makes directly.
func newCore(st *Store) *Core {
	noOwner := func(web.OwnerHandler) http.Handler { return http.NotFoundHandler() }
	return New(Config{}, st, testKit(), nil, noOwner, nil, Hooks{})
}

type waitResult struct {
	changes []feedChange
	err     error
	took    time.Duration
}

// startWait runs one waitChanges of service github in the background.
func startWait(c *Core, since int64, wait time.Duration) <-chan waitResult {
	out := make(chan waitResult, 1)
	go func() {
		began := time.Now()
		changes, _, err := c.waitChanges(context.Background(), "github", since, 10, wait)
		out <- waitResult{changes, err, time.Since(began)}
	}()
	return out
}

// TestFeedWait holds a request for changes and ends it with a change made
// through another instance. On PostgreSQL that is a second Core over its
// own connection pool, which reaches the waiting one only by NOTIFY. On
// SQLite, one instance per file, it is the same Core.
func TestFeedWait(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			cfg := storeConfig(t, engine)
			st := openStore(t, cfg)
			populateFeed(t, st, 3)
			pending := seedClaims(t, st, 3, StatusPending)
			_, cursor := fullFeed(t, st, "github")
			waiter := newCore(st)
			mover := waiter
			if engine == sqldb.ProviderPostgres {
				mover = newCore(openStore(t, cfg))
			}
			t.Cleanup(waiter.EndWaits)
			// On PostgreSQL every test's changes on the server wake these
			// waits, so a full channel drops a signal rather than block
			// the wait that sends it.
			blocked := make(chan string, 64)
			waiter.waits.Blocked = func(service string) {
				select {
				case blocked <- service:
				default:
				}
			}
			ctx := context.Background()
			move := func(id, action string) {
				t.Helper()
				now := time.Now()
				c, err := mover.store.transition(ctx, "acme", id, action, now.Add(-time.Hour), now)
				if err != nil {
					t.Fatal(err)
				}
				mover.publish(ctx, actionEvents[action], c)
			}

			t.Run("a change made elsewhere ends the wait with it", func(t *testing.T) {
				res := startWait(waiter, cursor, MaxFeedWait)
				<-blocked
				move(pending[0], "approve")
				r := <-res
				if r.err != nil || len(r.changes) != 1 || r.changes[0].Op != feedOpUpsert || r.changes[0].Claim.ID != pending[0] {
					t.Fatalf("woken with %+v, %v", r.changes, r.err)
				}
				cursor = r.changes[0].Seq
			})

			t.Run("a revocation ends it too", func(t *testing.T) {
				res := startWait(waiter, cursor, MaxFeedWait)
				<-blocked
				move(pending[0], "revoke")
				r := <-res
				if r.err != nil || len(r.changes) != 1 || r.changes[0].Op != feedOpDelete || r.changes[0].Claim.ID != pending[0] {
					t.Fatalf("woken with %+v, %v", r.changes, r.err)
				}
				cursor = r.changes[0].Seq
			})

			t.Run("a rejection ends it too, though no approved claim changes", func(t *testing.T) {
				res := startWait(waiter, cursor, MaxFeedWait)
				<-blocked
				move(pending[2], "reject")
				r := <-res
				if r.err != nil || len(r.changes) != 1 || r.changes[0].Op != feedOpReject || r.changes[0].Claim.ID != pending[2] {
					t.Fatalf("woken with %+v, %v", r.changes, r.err)
				}
				cursor = r.changes[0].Seq
			})

			t.Run("a change already made is answered without waiting", func(t *testing.T) {
				move(pending[1], "approve")
				r := <-startWait(waiter, cursor, MaxFeedWait)
				if r.err != nil || len(r.changes) != 1 || r.changes[0].Claim.ID != pending[1] {
					t.Fatalf("answered %+v, %v", r.changes, r.err)
				}
				cursor = r.changes[0].Seq
			})

			t.Run("the wait ends without a change", func(t *testing.T) {
				r := <-startWait(waiter, cursor, time.Second)
				<-blocked
				if r.err != nil || len(r.changes) != 0 || r.took < time.Second {
					t.Fatalf("answered %+v, %v after %v", r.changes, r.err, r.took)
				}
			})

			// Waits of other tests' databases on this server are woken
			// too (the channel is the server's): forget what blocked so far.
			drain := func() {
				for len(blocked) > 0 {
					<-blocked
				}
			}

			t.Run("past the waits one service may hold, a request is answered at once", func(t *testing.T) {
				drain()
				var held []*wake.Wait
				for range MaxFeedWaitsPerService {
					fw, err := waiter.waits.Start(ctx, "github")
					if err != nil {
						t.Fatal(err)
					}
					held = append(held, fw)
				}
				r := <-startWait(waiter, cursor, MaxFeedWait)
				if r.err != nil || len(r.changes) != 0 || len(blocked) != 0 {
					t.Fatalf("answered %+v, %v; %d blocked", r.changes, r.err, len(blocked))
				}
				for _, fw := range held {
					fw.End()
				}
			})

			t.Run("EndWaits answers the waiting request, and later ones at once", func(t *testing.T) {
				drain()
				res := startWait(waiter, cursor, MaxFeedWait)
				<-blocked
				waiter.EndWaits()
				if r := <-res; r.err != nil || len(r.changes) != 0 {
					t.Fatalf("answered %+v, %v", r.changes, r.err)
				}
				drain()
				if r := <-startWait(waiter, cursor, MaxFeedWait); r.err != nil || len(r.changes) != 0 || len(blocked) != 0 {
					t.Fatalf("after EndWaits: %+v, %v", r.changes, r.err)
				}
			})
		})
	}
}

// TestFeedWaitsUnderChurn: followers hold waits for the changes of one
// service, one after another, while writers approve and revoke through
// another instance. Each follower ends with exactly the full feed. A lost
// wake (a follower waiting out MaxFeedWait for a change already
// committed) fails the test by its deadline.
func TestFeedWaitsUnderChurn(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			cfg := storeConfig(t, engine)
			st := openStore(t, cfg)
			populateFeed(t, st, 10)
			pending := seedClaims(t, st, 60, StatusPending)
			waiter := newCore(st)
			mover := waiter
			if engine == sqldb.ProviderPostgres {
				mover = newCore(openStore(t, cfg))
			}
			t.Cleanup(waiter.EndWaits)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			const followers = 6
			models := make([]feedModel, followers)
			cursors := make([]int64, followers)
			for i := range followers {
				models[i], cursors[i] = fullFeed(t, st, "github")
			}
			// Every claim is approved, every other one revoked again.
			last := cursors[0] + int64(len(pending)+len(pending)/2)
			var wg sync.WaitGroup
			for i := range followers {
				wg.Go(func() {
					for cursors[i] < last {
						changes, _, err := waiter.waitChanges(ctx, "github", cursors[i], 7, MaxFeedWait)
						if err != nil {
							t.Errorf("follower %d at %d of %d: %v", i, cursors[i], last, err)
							return
						}
						for _, ch := range changes {
							models[i].apply(ch.Op, ch.Claim.Namespace, ch.Claim.PublicKey, ch.Claim.ID)
							cursors[i] = ch.Seq
						}
					}
				})
			}
			var writers sync.WaitGroup
			for w := range 3 {
				writers.Go(func() {
					for i := w; i < len(pending); i += 3 {
						for _, action := range []string{"approve", "revoke"}[:1+i%2] {
							now := time.Now()
							c, err := mover.store.transition(ctx, "acme", pending[i], action, now.Add(-time.Hour), now)
							if err != nil {
								t.Error(err)
								return
							}
							mover.publish(ctx, actionEvents[action], c)
						}
					}
				})
			}
			writers.Wait()
			wg.Wait()
			full, _ := fullFeed(t, st, "github")
			for i, m := range models {
				if !maps.Equal(m, full) {
					t.Fatalf("follower %d holds %d claims, the feed %d", i, len(m), len(full))
				}
			}
		})
	}
}
