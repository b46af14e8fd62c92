package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache/feedwire"
	"github.com/idnhq/idn/identity"
)

var (
	feedBenchClaims   = flag.Int("feed-claims", 100_000, "approved claims seeded by BenchmarkFeedChanges and BenchmarkFeedGateways")
	feedBenchGateways = flag.Int("feed-gateways", 1000, "gateways simulated by BenchmarkFeedGateways")
)

// seedFeedClaims is populateFeed with the change log pruned to its
// retention, as a control plane in its steady state holds it. It returns
// a key of the service.
func seedFeedClaims(tb testing.TB, st *Store, n int) string {
	tb.Helper()
	key := populateFeed(tb, st, n)
	if _, err := claimsAPI(st).Maintain(context.Background()); err != nil {
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
		action := "revoke"
		if i%2 == 0 {
			var pub [32]byte
			rand.Read(pub[:])
			var err error
			if c, err = claimsAPI(st).Seed(ctx, Claim{Namespace: "acme", PublicKey: identity.FormatPublicKey(pub[:]), Service: "github", Status: StatusPending}); err != nil {
				tb.Fatal(err)
			}
			action = "approve"
		}
		move(tb, st, c.ID, action)
	}
}

// BenchmarkFeedGateways simulates -feed-gateways gateways following one
// service's feed of -feed-claims claims over HTTP, time compressed: each
// round makes one change and then every gateway asks once for the changes
// since its cursor, as each would every second with one change a second.
// A simulated gateway keeps its cursor, not a snapshot. cpu-us/refresh is
// the CPU of this process (the control plane and the gateways' clients,
// which sign each request) plus, on PostgreSQL, of the server's processes,
// per refresh; s/round under 1 means the machine keeps up in real time.
func BenchmarkFeedGateways(b *testing.B) {
	for _, engine := range engines {
		b.Run(engine, func(b *testing.B) {
			st := openStore(b, storeConfig(b, engine))
			key := seedFeedClaims(b, st, *feedBenchClaims)
			srv, err := New(Config{Store: st, JWTSecret: testSecret, SignedRatePerMinute: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			_, head := feedHead(b, st, "github")
			gateways := make([]gateway, *feedBenchGateways)
			for i := range gateways {
				id, _ := identity.New("gateway")
				gateways[i] = gateway{id: id, cursor: head}
			}
			transport := &http.Transport{MaxIdleConnsPerHost: 64}
			defer transport.CloseIdleConnections()
			client := &http.Client{Transport: transport}
			dbProcs := postgresProcesses(b, st)

			cpu0, db0 := processCPU(), procsCPU(dbProcs)
			start := time.Now()
			rounds, applied := 0, 0
			for b.Loop() {
				churn(b, st, 1)
				work := make(chan *gateway)
				var wg sync.WaitGroup
				var mu sync.Mutex
				for range 32 {
					wg.Go(func() {
						n := 0
						for g := range work {
							n += g.refresh(b, client, ts.URL, key)
						}
						mu.Lock()
						applied += n
						mu.Unlock()
					})
				}
				for i := range gateways {
					work <- &gateways[i]
				}
				close(work)
				wg.Wait()
				rounds++
			}
			wall := time.Since(start)
			cpu := processCPU() - cpu0 + procsCPU(dbProcs) - db0
			refreshes := float64(rounds * len(gateways))
			b.ReportMetric(float64(cpu.Microseconds())/refreshes, "cpu-us/refresh")
			b.ReportMetric(wall.Seconds()/float64(rounds), "s/round")
			b.ReportMetric(float64(applied)/refreshes, "changes/refresh")
		})
	}
}

// gateway is a simulated gateway: an identity and a cursor.
type gateway struct {
	id     *identity.Identity
	cursor int64
}

// refresh asks for the changes since the gateway's cursor and moves it; it
// returns the number of changes.
func (g *gateway) refresh(b *testing.B, client *http.Client, base, key string) int {
	req, _ := http.NewRequest("GET", base+"/v1/namespaces/claims?since="+feedwire.FormatCursor(g.cursor), nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if err := g.id.Sign(req, identity.SignOptions{}); err != nil {
		b.Error(err)
		return 0
	}
	res, err := client.Do(req)
	if err != nil {
		b.Error(err)
		return 0
	}
	defer res.Body.Close()
	var body feedwire.Changes
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != 200 {
		b.Errorf("refresh: %d %v", res.StatusCode, err)
		return 0
	}
	g.cursor, _ = feedwire.ParseCursor(body.Cursor)
	return len(body.Changes)
}

// processCPU is the user and system CPU this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// postgresProcesses returns the /proc entries of the PostgreSQL server
// behind st (its postmaster's children), or nil on SQLite or where /proc
// cannot tell.
func postgresProcesses(b *testing.B, st *Store) []string {
	if !st.db.PG() {
		return nil
	}
	var backend int
	if err := st.db.QueryRowContext(context.Background(), `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		b.Fatal(err)
	}
	postmaster := procField(fmt.Sprintf("/proc/%d/stat", backend), 4)
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			if p := "/proc/" + e.Name() + "/stat"; procField(p, 4) == postmaster && postmaster != 0 {
				out = append(out, p)
			}
		}
	}
	return out
}

// procsCPU sums the CPU used by the processes at stat paths (the ones
// still running).
func procsCPU(stats []string) time.Duration {
	var ticks int64
	for _, p := range stats {
		ticks += procField(p, 14) + procField(p, 15) // utime, stime
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ = 100
}

// procField returns field n (numbered from 1, as in proc(5): 4 is the
// parent's pid, 14 and 15 the user and system time) of a /proc/<pid>/stat
// file, or 0. The fields after the command name start at 3.
func procField(path string, n int) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if n < 3 || n-3 >= len(fields) {
		return 0
	}
	v, _ := strconv.ParseInt(fields[n-3], 10, 64)
	return v
}
