package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/replay"
	"github.com/idnhq/idn/replay/redisstore"
	"github.com/idnhq/idn/replay/redisstore/redistest"
	"github.com/redis/go-redis/v9"
)

func open(t testing.TB, cfg redisstore.Config) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Two stores on one Redis are two replicas: what one accepts, the other
// refuses, and a replica reopened (restarted) still refuses it.
func TestReplayRefusedOnEveryReplica(t *testing.T) {
	for _, form := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"standalone", func(t *testing.T) string { return redistest.Start(t).URL() }},
		{"sentinel", func(t *testing.T) string { return redistest.StartSentinel(t).URL() }},
		{"cluster", func(t *testing.T) string { return redistest.StartCluster(t).URL() }},
	} {
		t.Run(form.name, func(t *testing.T) {
			url := form.url(t)
			a, b := open(t, redisstore.Config{URL: url}), open(t, redisstore.Config{URL: url})
			ctx, until := t.Context(), time.Now().Add(time.Minute)
			if err := a.CheckNonce(ctx, "alice", "n1", until); err != nil {
				t.Fatalf("fresh nonce: %v", err)
			}
			if err := b.CheckNonce(ctx, "alice", "n1", until); !errors.Is(err, replay.ErrReplay) {
				t.Fatalf("replay to the other replica: %v, want ErrReplay", err)
			}
			if err := b.CheckNonce(ctx, "bob", "n1", until); err != nil {
				t.Fatalf("the same nonce in another scope: %v", err)
			}
			a.Close()
			restarted := open(t, redisstore.Config{URL: url})
			if err := restarted.CheckNonce(ctx, "alice", "n1", until); !errors.Is(err, replay.ErrReplay) {
				t.Fatalf("replay after a restart: %v, want ErrReplay", err)
			}
			if err := restarted.Ready(ctx); err != nil {
				t.Fatalf("Ready: %v", err)
			}
		})
	}
}

// Of many replicas racing one nonce, exactly one wins.
func TestConcurrentReplayOneWinner(t *testing.T) {
	url := redistest.Start(t).URL()
	stores := []*redisstore.Store{open(t, redisstore.Config{URL: url}), open(t, redisstore.Config{URL: url})}
	until := time.Now().Add(time.Minute)
	for round := range 20 {
		var won atomic.Int32
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				err := stores[i%2].CheckNonce(t.Context(), "alice", fmt.Sprint("race-", round), until)
				switch {
				case err == nil:
					won.Add(1)
				case !errors.Is(err, replay.ErrReplay):
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if won.Load() != 1 {
			t.Fatalf("round %d: %d checks accepted one nonce", round, won.Load())
		}
	}
}

// The nonce's key lives past until, by twice the clock bound, so a
// replica whose clock lags by up to that bound still finds it.
func TestNonceKeptPastItsWindow(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, redisstore.Config{URL: srv.URL(), MaxClockSkew: 3 * time.Second})
	if err := s.CheckNonce(t.Context(), "alice", "n", time.Now().Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	keys, err := c.Keys(t.Context(), redisstore.DefaultPrefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var ttls []time.Duration
	for _, k := range keys {
		if !strings.HasSuffix(k, ":lost") {
			ttls = append(ttls, c.PTTL(t.Context(), k).Val())
		}
	}
	if len(ttls) != 1 || ttls[0] < 15*time.Second || ttls[0] > 16*time.Second {
		t.Fatalf("nonce keys' TTLs %v, want one of 16 s (10 s + 2 × 3 s)", ttls)
	}
}

// Attack row: Redis restarts without its data (no persistence, or a
// failover to a replica behind). A replay of a request accepted before
// is refused; a signature made after the window is accepted.
func TestRedisDataLossReopensNoReplay(t *testing.T) {
	srv := redistest.Start(t)
	window := 2 * time.Second
	s := open(t, redisstore.Config{URL: srv.URL(), Window: window, MaxClockSkew: time.Second})
	until := time.Now().Add(window)
	if err := s.CheckNonce(t.Context(), "alice", "order-1", until); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if err := s.CheckNonce(t.Context(), "alice", "order-2", until); !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("Redis down: %v, want ErrUnavailable", err)
	}
	if err := s.Ready(t.Context()); !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("Ready with Redis down: %v", err)
	}
	srv.Start()
	if err := s.CheckNonce(t.Context(), "alice", "order-1", until); !errors.Is(err, redisstore.ErrSignedBeforeLoss) {
		t.Fatalf("replay after Redis lost its data: %v, want ErrSignedBeforeLoss", err)
	}
	if !errors.Is(redisstore.ErrSignedBeforeLoss, replay.ErrReplay) {
		t.Fatal("ErrSignedBeforeLoss must be a replay (AUTH_REPLAY_DETECTED)")
	}
	// Past the window and the clocks' margin, nothing accepted before
	// the loss can still pass: a signature reaching there is fresh.
	later := time.Now().Add(window + 2*time.Second + time.Second)
	if err := s.CheckNonce(t.Context(), "alice", "order-3", later); err != nil {
		t.Fatalf("a signature made after the loss: %v", err)
	}
	if err := s.Ready(t.Context()); err != nil {
		t.Fatalf("Ready after Redis came back: %v", err)
	}
}

// Fault row: one replica's clock is off. Past MaxClockSkew it refuses
// every check and is not ready; within it, it works.
func TestClockSkewedReplica(t *testing.T) {
	url := redistest.Start(t).URL()
	for _, row := range []struct {
		name string
		skew time.Duration
		ok   bool
	}{
		{"in sync", 0, true},
		{"within the bound", 500 * time.Millisecond, true},
		{"ahead", 10 * time.Second, false},
		{"behind", -10 * time.Second, false},
	} {
		t.Run(row.name, func(t *testing.T) {
			clock := func() time.Time { return time.Now().Add(row.skew) }
			s := open(t, redisstore.Config{URL: url, Clock: clock, MaxClockSkew: 2 * time.Second})
			err := s.CheckNonce(t.Context(), "alice", row.name, clock().Add(time.Minute))
			ready := s.Ready(t.Context())
			if row.ok && (err != nil || ready != nil) {
				t.Fatalf("CheckNonce %v, Ready %v; want both nil", err, ready)
			}
			if !row.ok && (!errors.Is(err, replay.ErrUnavailable) || !errors.Is(ready, replay.ErrUnavailable)) {
				t.Fatalf("CheckNonce %v, Ready %v; want both ErrUnavailable", err, ready)
			}
		})
	}
}

// A replica may start before Redis: it refuses every check and is not
// ready until Redis answers, then serves without a restart.
func TestStartsBeforeRedis(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	s := open(t, redisstore.Config{URL: srv.URL(), Timeout: 200 * time.Millisecond})
	until := time.Now().Add(time.Minute)
	if err := s.CheckNonce(t.Context(), "alice", "n1", until); !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("Redis not started: %v, want ErrUnavailable", err)
	}
	if err := s.Ready(t.Context()); !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("Ready before Redis: %v", err)
	}
	srv.Start()
	if err := s.Ready(t.Context()); err != nil {
		t.Fatalf("Ready once Redis answers: %v", err)
	}
	if err := s.CheckNonce(t.Context(), "alice", "n1", until); err != nil {
		t.Fatalf("a fresh nonce once Redis answers: %v", err)
	}
	if err := s.CheckNonce(t.Context(), "alice", "n1", until); !errors.Is(err, replay.ErrReplay) {
		t.Fatalf("its replay: %v", err)
	}
}

// A Redis that evicts keys when full would forget nonces: refused.
func TestEvictingRedisRefused(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory-policy", "allkeys-lru")
	_, err := redisstore.New(t.Context(), redisstore.Config{URL: srv.URL()})
	if err == nil || !strings.Contains(err.Error(), "noeviction") {
		t.Fatalf("New on an evicting Redis: %v", err)
	}
}

func TestURLForms(t *testing.T) {
	for _, row := range []struct{ name, url string }{
		{"no scheme", "127.0.0.1:6379"},
		{"unknown parameter", "redis://127.0.0.1:6379?colour=blue"},
		{"does not parse", "redis://user:sec%ret@127.0.0.1:6379"},
	} {
		t.Run(row.name, func(t *testing.T) {
			_, err := redisstore.New(context.Background(), redisstore.Config{URL: row.url})
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), "sec") {
				t.Fatalf("the error quotes the password: %v", err)
			}
		})
	}
}
