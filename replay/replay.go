// Package replay is a bounded, in-memory nonce store for replay protection of
// signed requests (RFC 9421 §7.2.2, profile idn-rfc9421-v1).
//
// A Store remembers each (scope, nonce) pair, where the scope is the signer's
// namespace, until the time its signature stops being acceptable (created +
// max age, plus skew). A second CheckNonce of the same pair before then fails
// with ErrReplay. Memory is bounded by Config.MaxEntries: when the store is full,
// CheckNonce returns ErrFull instead of evicting a live nonce, so a flood can
// deny service but can never make a replay pass.
//
// Expiry has no stop-the-world sweep. Entries are grouped into generations by
// the end of the Config.Granularity interval in which their expiry falls; a
// generation whose interval has ended is dropped as a whole, in bounded time:
// its map is released to the garbage collector, which frees it concurrently,
// or, when small, emptied and reused for a later generation. An entry may thus be
// remembered up to one granularity longer than asked, never shorter. The store
// is sharded so that concurrent callers rarely share a lock.
package replay

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/httpsig"
)

// Defaults for the zero Config.
const (
	DefaultMaxEntries  = 1_000_000
	DefaultGranularity = 30 * time.Second
)

// shardCount splits the store so that concurrent checks rarely contend.
const shardCount = 32

var (
	// ErrReplay means the (scope, nonce) pair was already recorded and has
	// not expired: the request is a replay. It is httpsig.ErrReplayDetected,
	// so a verifier reports it as the replay it is.
	ErrReplay = httpsig.ErrReplayDetected
	// ErrFull means the store holds MaxEntries live nonces; the nonce was not
	// recorded and the request must be refused (the gateway answers 503).
	ErrFull = errors.New("replay: nonce store full")
)

// Config configures a Store. The zero value is usable.
type Config struct {
	// MaxEntries bounds the number of remembered nonces. Zero means
	// DefaultMaxEntries; negative is an error.
	MaxEntries int
	// Granularity is the width of one expiry generation. Entries are kept up
	// to one Granularity past their expiry, and a check looks at one map per
	// live generation, so it trades memory slack against lookup cost. Zero
	// means DefaultGranularity; negative is an error.
	Granularity time.Duration
	// Clock returns the current time. Nil means time.Now.
	Clock func() time.Time
}

// Store is a bounded nonce store, safe for concurrent use. It is an
// httpsig.NonceChecker.
type Store struct {
	max    int64
	gran   int64 // nanoseconds
	clock  func() time.Time
	n      atomic.Int64 // entries held, including expired ones not yet dropped
	shards [shardCount]shard
}

var _ httpsig.NonceChecker = (*Store)(nil)

type key [16]byte

type shard struct {
	mu    sync.Mutex
	gens  []generation       // ascending by end
	spare []map[key]struct{} // emptied maps of dropped generations, for reuse
	_     [8]byte            // keep shards on separate cache lines
}

// Dropped generation maps up to recycleLen entries are emptied and reused, so
// a store in steady state allocates almost nothing and does not drive the
// garbage collector (whose assists would show up as latency in checks).
// Larger maps, left by bursts, are released instead of pinning their memory.
const (
	recycleLen   = 8192
	recycleSlots = 2
)

// generation holds the entries whose expiry lies in (end-gran, end].
type generation struct {
	end     int64 // unix nanoseconds
	entries map[key]struct{}
}

// New returns a Store configured by cfg.
func New(cfg Config) (*Store, error) {
	if cfg.MaxEntries < 0 {
		return nil, fmt.Errorf("replay: MaxEntries %d is negative", cfg.MaxEntries)
	}
	if cfg.Granularity < 0 {
		return nil, fmt.Errorf("replay: Granularity %v is negative", cfg.Granularity)
	}
	s := &Store{max: int64(cfg.MaxEntries), gran: int64(cfg.Granularity), clock: cfg.Clock}
	if s.max == 0 {
		s.max = DefaultMaxEntries
	}
	if s.gran == 0 {
		s.gran = int64(DefaultGranularity)
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	return s, nil
}

// CheckNonce records nonce in scope until the given time. It returns an error
// wrapping ErrReplay when the pair is already recorded and live, ErrFull when
// the store is full, and nil when the nonce was fresh and is now recorded.
// Recording is atomic: of several concurrent checks of one pair, exactly one
// succeeds. An until that is not after the current time is treated as "now",
// so the nonce is still remembered for one generation. A check probes one map
// per live generation, so until should lie within minutes of now (the
// gateway's is created + max age + skew). ctx is unused; it is part of the
// checker interface for stores that do I/O.
func (s *Store) CheckNonce(_ context.Context, scope, nonce string, until time.Time) error {
	k := hashKey(scope, nonce)
	now := s.clock().UnixNano()
	exp := until.UnixNano()
	if exp <= now {
		exp = now + 1
	}
	end := ceilDiv(exp, s.gran) * s.gran

	sh := &s.shards[binary.LittleEndian.Uint64(k[:8])%shardCount]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s.dropExpired(sh, now)
	if sh.holds(k) {
		return fmt.Errorf("replay: nonce reused in its validity window: %w", ErrReplay)
	}
	if s.n.Add(1) > s.max {
		// Expired generations of other shards may still be counted. They
		// are swept with this shard's lock released, so a check holds one
		// lock at a time: two full shards sweeping each other would
		// otherwise wait on each other for ever. The pair may have been
		// recorded meanwhile, so it is looked up again.
		s.n.Add(-1)
		sh.mu.Unlock()
		s.sweep(now)
		sh.mu.Lock()
		if sh.holds(k) {
			return fmt.Errorf("replay: nonce reused in its validity window: %w", ErrReplay)
		}
		if s.n.Add(1) > s.max {
			s.n.Add(-1)
			return fmt.Errorf("replay: %d nonces held: %w", s.max, ErrFull)
		}
	}
	sh.generation(end)[k] = struct{}{}
	return nil
}

// holds reports whether a live generation of sh has k. The caller holds
// sh.mu.
func (sh *shard) holds(k key) bool {
	for i := range sh.gens {
		if _, ok := sh.gens[i].entries[k]; ok {
			return true
		}
	}
	return false
}

// Len reports the number of nonces held. It first drops expired generations,
// so it is suited to a gauge scraped now and then, not to a hot path.
func (s *Store) Len() int {
	s.sweep(s.clock().UnixNano())
	return int(s.n.Load())
}

// dropExpired releases every generation of sh that ended at or before now.
// The caller holds sh.mu.
func (s *Store) dropExpired(sh *shard, now int64) {
	i := 0
	for i < len(sh.gens) && sh.gens[i].end <= now {
		m := sh.gens[i].entries
		s.n.Add(-int64(len(m)))
		if len(m) <= recycleLen && len(sh.spare) < recycleSlots {
			clear(m)
			sh.spare = append(sh.spare, m)
		}
		i++
	}
	if i > 0 {
		n := copy(sh.gens, sh.gens[i:])
		clear(sh.gens[n:])
		sh.gens = sh.gens[:n]
	}
}

// sweep drops expired generations in every shard, taking one shard's lock
// at a time. The caller holds none.
func (s *Store) sweep(now int64) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		s.dropExpired(sh, now)
		sh.mu.Unlock()
	}
}

// generation returns the entry map of the generation ending at end, creating
// it in order when absent. The caller holds sh.mu.
func (sh *shard) generation(end int64) map[key]struct{} {
	i := len(sh.gens)
	for i > 0 && sh.gens[i-1].end >= end {
		if sh.gens[i-1].end == end {
			return sh.gens[i-1].entries
		}
		i--
	}
	g := generation{end: end}
	if n := len(sh.spare); n > 0 {
		g.entries, sh.spare = sh.spare[n-1], sh.spare[:n-1]
	} else {
		g.entries = make(map[key]struct{})
	}
	sh.gens = append(sh.gens, generation{})
	copy(sh.gens[i+1:], sh.gens[i:])
	sh.gens[i] = g
	return g.entries
}

// hashKey maps (scope, nonce) to a fixed-size key. The length prefix keeps
// ("ab","c") and ("a","bc") apart; SHA-256 keeps attacker-chosen nonces from
// colliding with someone else's.
func hashKey(scope, nonce string) key {
	var buf [256]byte
	b := binary.AppendUvarint(buf[:0], uint64(len(scope)))
	b = append(b, scope...)
	b = append(b, nonce...)
	sum := sha256.Sum256(b)
	return key(sum[:16])
}

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b > 0 {
		q++
	}
	return q
}
