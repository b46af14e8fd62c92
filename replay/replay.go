// Package replay is a bounded, in-memory nonce store for replay protection of
// signed requests (RFC 9421 §7.2.2, profile idn-rfc9421-v1).
//
// A Store remembers each (scope, nonce) pair, where the scope is the signer's
// namespace, until the time its signature stops being acceptable (created +
// max age, plus skew). A second CheckNonce of the same pair before then fails
// with ErrReplay. Memory is bounded by Config.MaxBytes: when no room is left,
// CheckNonce returns ErrFull instead of evicting a live nonce, so a flood can
// deny service but can never make a replay pass.
//
// A nonce takes one 12-byte slot: a 64-bit fingerprint of the pair (a
// SHA-256 keyed with a secret drawn at New, so no one can aim nonces at a
// part of the table) and its expiry, to the second. Slots live in a
// bucketized cuckoo hash table: each fingerprint has two candidate buckets
// of five slots, one cache line each, chosen by its two halves; a lookup
// reads those two cache lines, and an insert that finds both full moves
// fingerprints to their other bucket along the shortest path to a free
// slot. The table is about 97% full when an insert first finds no room, so
// a nonce costs about 13 bytes at the bound; plan with Bytes. A slot whose
// expiry has passed is free, so expiry costs nothing: there is no sweep, no
// generation to drop, no garbage. A fresh nonce is taken for a replay only
// when a live one of its shard has the same 64 bits, about once in 2⁴⁵
// checks with the default store full; a collision can only refuse a fresh
// nonce, never accept a replay.
//
// The table is split into shards, each with its own lock, so that
// concurrent callers rarely share one; no caller ever holds two. A shard's
// table starts small and grows by half when an insert finds no path, up to
// its share of MaxBytes; it does not shrink.
//
// A clean stop keeps what the store knows: Close, then WriteTo a file;
// the next process's store takes it back with ReadFrom before its first
// check (package gateway does this in its data directory).
//
// Configuration follows the repository's one rule: the zero value of every
// field of Config is the safe one (a required field left empty is refused),
// and a protection is turned off only by a field that says so: a negative
// number, an explicit off value, or an Insecure… switch.
package replay

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"

	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/internal/heldmem"
)

// DefaultMaxBytes is the zero Config's memory bound: 19 million nonces
// (MaxBytes / Bytes), enough for 58,000 requests/s sustained with a 330 s
// window.
const DefaultMaxBytes = 256 << 20

// Bytes is what to budget per nonce. A nonce takes a slot of 12.8 bytes (a
// 64-byte bucket holds five), and the first refusal comes at about 97% of
// slots in use (13.2 bytes a nonce; BenchmarkMemory), later ones more and
// more often up to 99.9%; 14 leaves a margin. So a Store holds MaxBytes /
// Bytes nonces, and one whose nonces are kept W seconds sustains MaxBytes
// / Bytes / W requests per second.
const Bytes = 14

// MemoryFor returns the MaxBytes that holds n nonces.
func MemoryFor(n int) int64 { return int64(n) * Bytes }

const (
	bucketSlots    = 5
	bucketBytes    = int64(unsafe.Sizeof(bucket{}))
	maxShards      = 32
	minShardBytes  = 1 << 20 // below it, fewer shards, so each keeps a useful size
	initialBuckets = 64
	// searchBuckets bounds the breadth-first search for a free slot (paths
	// of up to four moves). The first insert that finds none comes at
	// about 97% of slots in use (BenchmarkMemory); a refusal costs a
	// search of 512 buckets, some tens of microseconds
	// (BenchmarkCheckNonceFull).
	searchBuckets = 512
)

var (
	// ErrReplay means the (scope, nonce) pair was already recorded and has
	// not expired: the request is a replay. It is httpsig.ErrReplayDetected,
	// so a verifier reports it as the replay it is.
	ErrReplay = httpsig.ErrReplayDetected
	// ErrFull means the store has no room for the nonce within MaxBytes; it
	// was not recorded and the request must be refused (the gateway
	// answers 503).
	ErrFull = errors.New("replay: nonce store full")
	// ErrClosed means the store was closed (Close) and records no more
	// nonces; the request must be refused.
	ErrClosed = errors.New("replay: nonce store closed")
	// ErrUnavailable means a shared store (replay/redisstore) could not
	// record the nonce: unreachable, or unsure of what it holds. The
	// request must be refused; no store may fall back to a local memory.
	ErrUnavailable = errors.New("replay: nonce store unavailable")
)

// Config configures a Store. The zero value is usable.
type Config struct {
	// MaxBytes bounds the memory of the store's tables. Zero means
	// DefaultMaxBytes; below one bucket (64 bytes) is an error.
	MaxBytes int64
	// Clock returns the current time. Nil means time.Now.
	Clock func() time.Time
}

// Store is a bounded nonce store, safe for concurrent use. It is an
// httpsig.NonceChecker.
type Store struct {
	max    int64
	clock  func() time.Time
	base   int64 // unix seconds; expiries are stored as seconds after it
	secret [16]byte
	shards []shard
	tables heldmem.Counter // the shards' tables (HeldBytes)
}

var _ httpsig.NonceChecker = (*Store)(nil)

// bucket is one cache line of a table: five slots, each a fingerprint and
// the time until which its nonce is remembered, in seconds after
// Store.base. A slot whose time is not after now is free (0: never used).
type bucket struct {
	fp  [bucketSlots]uint64
	exp [bucketSlots]uint32
	_   uint32
}

type shard struct {
	mu         sync.Mutex
	buckets    []bucket
	maxBuckets int
	search     []step // scratch for insert's search
	closed     bool   // by Close: record nothing more
	_          [23]byte
}

// step is one bucket of the search for a free slot: reached by moving the
// fingerprint in slot from of search[parent] to here.
type step struct {
	bucket int32
	parent int32 // -1 for the fingerprint's own buckets
	from   int8
}

// New returns a Store configured by cfg.
func New(cfg Config) (*Store, error) {
	limit := cfg.MaxBytes
	if limit == 0 {
		limit = DefaultMaxBytes
	}
	if limit < bucketBytes {
		return nil, fmt.Errorf("replay: MaxBytes %d is less than one bucket (%d)", cfg.MaxBytes, bucketBytes)
	}
	s := &Store{max: limit, clock: cfg.Clock}
	if s.clock == nil {
		s.clock = time.Now
	}
	s.base = s.clock().Unix() - 1
	rand.Read(s.secret[:])
	n := maxShards
	for n > 1 && limit/int64(n) < minShardBytes {
		n /= 2
	}
	s.shards = make([]shard, n)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.maxBuckets = int(min(limit/int64(n)/bucketBytes, math.MaxInt32))
		sh.buckets = make([]bucket, min(initialBuckets, sh.maxBuckets))
		heldmem.Hold(&s.tables, sh.buckets)
	}
	return s, nil
}

// CheckNonce records nonce in scope until the given time. It returns an error
// wrapping ErrReplay when the pair is already recorded and live, ErrFull when
// the store has no room, ErrClosed after Close, and nil when the nonce was
// fresh and is now recorded. Recording is atomic: of several concurrent
// checks of one pair, exactly one succeeds. The nonce is remembered until at
// least until, and at least a second: to the next whole second after, or
// after now when until is earlier. ctx is unused; it is part of the checker
// interface for stores that do I/O.
func (s *Store) CheckNonce(_ context.Context, scope, nonce string, until time.Time) error {
	fp, shardBits := s.fingerprint(scope, nonce)
	nowNs := s.clock().UnixNano()
	now := s.since(nowNs / 1e9)
	exp := s.since(ceilDiv(max(until.UnixNano(), nowNs+1e9), 1e9))
	sh := &s.shards[fastrange(shardBits, len(s.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.closed {
		return ErrClosed
	}
	b1, b2 := sh.candidates(fp)
	if sh.holds(b1, fp, now) || sh.holds(b2, fp, now) {
		return fmt.Errorf("replay: nonce reused in its validity window: %w", ErrReplay)
	}
	for !sh.insert(fp, exp, now) {
		if !sh.grow(now, &s.tables) {
			return fmt.Errorf("replay: no room for the nonce in %d bytes: %w", s.max, ErrFull)
		}
	}
	return nil
}

// HeldBytes returns the bytes of s's tables, which are large and
// pointer-free: gctune.Tune leaves them out of the collector's headroom.
func (s *Store) HeldBytes() int64 { return s.tables.Bytes() }

// Len reports the number of live nonces. It reads the whole table, one
// shard at a time, so it suits a gauge scraped now and then, not a hot
// path.
func (s *Store) Len() int {
	now := s.since(s.clock().Unix())
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for b := range sh.buckets {
			for _, exp := range sh.buckets[b].exp {
				if exp > now {
					n++
				}
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// since returns unix second t as seconds after s.base, clamped to the
// stored range.
func (s *Store) since(t int64) uint32 {
	return uint32(min(max(t-s.base, 0), math.MaxUint32))
}

// fingerprint maps (scope, nonce) to the 64 bits its slot keeps and the
// 32 that pick its shard, which need no keeping. The length prefix keeps
// ("ab","c") and ("a","bc") apart; the secret keeps anyone from choosing
// nonces that land in given buckets or collide with someone else's.
func (s *Store) fingerprint(scope, nonce string) (fp uint64, shard uint32) {
	var buf [256]byte
	b := append(buf[:0], s.secret[:]...)
	b = binary.AppendUvarint(b, uint64(len(scope)))
	b = append(b, scope...)
	b = append(b, nonce...)
	sum := sha256.Sum256(b)
	return binary.LittleEndian.Uint64(sum[0:]), binary.LittleEndian.Uint32(sum[8:])
}

// candidates returns fp's two buckets in sh's current table, one from each
// half of it.
func (sh *shard) candidates(fp uint64) (int, int) {
	return fastrange(uint32(fp), len(sh.buckets)), fastrange(uint32(fp>>32), len(sh.buckets))
}

// holds reports whether bucket b holds fp, live at now.
func (sh *shard) holds(b int, fp uint64, now uint32) bool {
	bk := &sh.buckets[b]
	for j, f := range bk.fp {
		if f == fp && bk.exp[j] > now {
			return true
		}
	}
	return false
}

// insert puts fp, remembered until exp, in one of its buckets, moving other
// fingerprints to their other bucket along the shortest path to a free slot
// (empty, or expired at now). It reports false, changing nothing, when the
// search finds none.
func (sh *shard) insert(fp uint64, exp, now uint32) bool {
	b1, b2 := sh.candidates(fp)
	search := append(sh.search[:0], step{int32(b1), -1, -1})
	if b2 != b1 {
		search = append(search, step{int32(b2), -1, -1})
	}
	defer func() { sh.search = search }()
	for i := 0; i < len(search); i++ {
		bk := &sh.buckets[search[i].bucket]
		for j, e := range bk.exp {
			if e > now {
				continue
			}
			if !distinct(search, i) {
				// Breadth first, the first path found has no cycle, but
				// one that had would move a fingerprint twice and lose
				// another: never follow one.
				return false
			}
			// A free slot: shift each fingerprint on the path one step
			// towards it, then put sl in the slot freed at the start.
			at, free := i, j
			for search[at].parent >= 0 {
				p := search[at]
				to, from := &sh.buckets[p.bucket], &sh.buckets[search[p.parent].bucket]
				to.fp[free], to.exp[free] = from.fp[p.from], from.exp[p.from]
				at, free = int(p.parent), int(p.from)
			}
			to := &sh.buckets[search[at].bucket]
			to.fp[free], to.exp[free] = fp, exp
			return true
		}
		if len(search) >= searchBuckets {
			continue
		}
		for j, moved := range bk.fp {
			c1, c2 := sh.candidates(moved)
			other := c1
			if other == int(search[i].bucket) {
				other = c2
			}
			if other != int(search[i].bucket) {
				search = append(search, step{int32(other), int32(i), int8(j)})
			}
		}
	}
	return false
}

// distinct reports whether the buckets on the path to search[i] are all
// different.
func distinct(search []step, i int) bool {
	for a := i; a >= 0; a = int(search[a].parent) {
		for b := int(search[a].parent); b >= 0; b = int(search[b].parent) {
			if search[a].bucket == search[b].bucket {
				return false
			}
		}
	}
	return true
}

// grow moves sh's live fingerprints to a table half as large again, or as
// large as its share of MaxBytes allows. It reports false, changing
// nothing, when the table is at that size already or the live ones do not
// all fit. Half again, not twice: a table just grown is that much more
// than its nonces need, and a store sized by its busiest minutes keeps
// that size; the rehashing it costs (each nonce moved twice on average
// rather than once) is a few milliseconds of one shard's time per growth.
func (sh *shard) grow(now uint32, held *heldmem.Counter) bool {
	old := sh.buckets
	for size := len(old); size < sh.maxBuckets; {
		size = min(size+size/2, sh.maxBuckets)
		sh.buckets = make([]bucket, size)
		heldmem.Hold(held, sh.buckets)
		if sh.rehash(old, now) {
			return true
		}
	}
	sh.buckets = old
	return false
}

func (sh *shard) rehash(old []bucket, now uint32) bool {
	for b := range old {
		for j, exp := range old[b].exp {
			if exp > now && !sh.insert(old[b].fp[j], exp, now) {
				return false
			}
		}
	}
	return true
}

// fastrange maps x uniformly onto [0, n), n at most 2³¹.
func fastrange(x uint32, n int) int { return int(uint64(x) * uint64(n) >> 32) }

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b > 0 {
		q++
	}
	return q
}
