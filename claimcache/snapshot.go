package claimcache

import (
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"time"
)

// Approval is what a successful lookup returns: enough to log the decision.
type Approval struct {
	ClaimID    string
	ApprovedAt time.Time
}

// Limits on one claim's fields, so that they fit a slot; a claim over either
// is skipped as malformed. A valid namespace has at most 64 characters.
const (
	maxNamespaceLen = 64
	maxClaimIDLen   = math.MaxUint8
)

// inlineNamespace is how much of a namespace its slot holds; the rest, when
// there is any, is in the slot's tail.
const inlineNamespace = 16

// slot is one cell of a snapshot's table, one cache line long: the tuple
// itself, compared exactly (the raw public key and the namespace's first
// bytes), and the claim's metadata. The claim id is in the snapshot's arena
// at idOff. An empty slot has idLen 0.
type slot struct {
	publicKey  [ed25519.PublicKeySize]byte
	approvedAt int64 // Unix milliseconds
	idOff      uint32
	nsLen      uint8
	idLen      uint8
	namespace  [inlineNamespace]byte
}

// tail holds the part of a long namespace that its slot does not.
type tail [maxNamespaceLen - inlineNamespace]byte

// Shape of the perfect hash: tuples per bucket on average, and the share of
// the table's slots that stay empty (1 in emptyEvery), which keeps the search
// for the last buckets' pilots short.
const (
	bucketLoad = 4
	emptyEvery = 5
)

// snapshot is an immutable view of one service's approved claims, in a table
// addressed by a perfect hash built for exactly those tuples: each has a slot
// of its own that a lookup computes, so every lookup, hit or miss, reads one
// slot (one cache line) and compares it exactly.
//
// The hash follows PTHash (Pibiri and Trani, SIGIR 2021), with buckets of
// uniform expected size and plain 16-bit pilots. A seeded hash of the tuple
// picks a bucket of about bucketLoad tuples; the bucket's pilot, chosen when
// the snapshot is built, sends each of them to a free slot. The pilots take
// half a byte per claim and mostly stay in the processor's caches, so the
// slot is usually the lookup's only read from memory. When some namespace is
// longer than inlineNamespace, a second array, parallel to the table, holds
// the tails; its address does not depend on the slot's contents, so the two
// reads overlap.
type snapshot struct {
	pilots  []uint16
	table   []slot
	tails   []tail // nil, or as long as table
	arena   string // claim ids
	seed    maphash.Seed
	version string
	claims  int // distinct tuples
	skipped int // records that were malformed or for another service
}

// hash returns the tuple's hash. The seed is random per snapshot, so callers
// cannot aim their tuples at one bucket.
func (s *snapshot) hash(namespace string, publicKey *[ed25519.PublicKeySize]byte) uint64 {
	return maphash.Bytes(s.seed, publicKey[:]) ^ bits.RotateLeft64(maphash.String(s.seed, namespace), 31)
}

// bucket returns the bucket of a tuple's hash, from its high bits.
func (s *snapshot) bucket(h uint64) int {
	b, _ := bits.Mul64(h, uint64(len(s.pilots)))
	return int(b)
}

// position returns the slot that pilot sends a tuple's hash to. Tuples of one
// bucket share their hash's high bits, so the hash and pilot are mixed
// (with MurmurHash3's finalizer) before they pick the slot.
func (s *snapshot) position(h uint64, pilot uint16) int {
	x := h ^ (uint64(pilot)+1)*0x9e3779b97f4a7c15
	x = (x ^ x>>33) * 0xff51afd7ed558ccd
	x = (x ^ x>>33) * 0xc4ceb9fe1a85ec53
	i, _ := bits.Mul64(x^x>>33, uint64(len(s.table)))
	return int(i)
}

// holds reports whether the slot at i is the tuple's. It compares in 64-bit
// words and branches once, on the outcome: a lookup spends its time waiting
// for the slot to arrive from memory, and a branch on each part of it would
// keep the processor from working ahead meanwhile.
func (s *snapshot) holds(i int, namespace string, publicKey *[ed25519.PublicKeySize]byte) bool {
	sl := &s.table[i]
	var head [inlineNamespace]byte // zero-padded, as in the slot
	copy(head[:], namespace)
	le := binary.LittleEndian
	diff := (uint64(sl.nsLen) ^ uint64(len(namespace))) |
		(le.Uint64(sl.publicKey[0:]) ^ le.Uint64(publicKey[0:])) |
		(le.Uint64(sl.publicKey[8:]) ^ le.Uint64(publicKey[8:])) |
		(le.Uint64(sl.publicKey[16:]) ^ le.Uint64(publicKey[16:])) |
		(le.Uint64(sl.publicKey[24:]) ^ le.Uint64(publicKey[24:])) |
		(le.Uint64(sl.namespace[0:]) ^ le.Uint64(head[0:])) |
		(le.Uint64(sl.namespace[8:]) ^ le.Uint64(head[8:]))
	if diff != 0 || sl.idLen == 0 {
		return false
	}
	return len(namespace) <= inlineNamespace || string(s.tails[i][:len(namespace)-inlineNamespace]) == namespace[inlineNamespace:]
}

func (s *snapshot) lookup(namespace string, publicKey []byte) (Approval, bool) {
	if len(s.table) == 0 || len(publicKey) != ed25519.PublicKeySize {
		return Approval{}, false
	}
	key := (*[ed25519.PublicKeySize]byte)(publicKey)
	h := s.hash(namespace, key)
	i := s.position(h, s.pilots[s.bucket(h)])
	if !s.holds(i, namespace, key) {
		return Approval{}, false
	}
	sl := &s.table[i]
	return Approval{
		ClaimID:    s.arena[sl.idOff : sl.idOff+uint32(sl.idLen)],
		ApprovedAt: time.UnixMilli(sl.approvedAt).UTC(),
	}, true
}

// each calls yield for every tuple the snapshot holds, with its approval,
// until yield returns false. It is how a view folds its changes into a new
// snapshot.
func (s *snapshot) each(yield func(namespace string, publicKey *[ed25519.PublicKeySize]byte, a Approval) bool) {
	for i := range s.table {
		sl := &s.table[i]
		if sl.idLen == 0 {
			continue
		}
		n := int(sl.nsLen)
		ns := string(sl.namespace[:min(n, inlineNamespace)])
		if n > inlineNamespace {
			ns += string(s.tails[i][:n-inlineNamespace])
		}
		a := Approval{ClaimID: s.arena[sl.idOff : sl.idOff+uint32(sl.idLen)], ApprovedAt: time.UnixMilli(sl.approvedAt).UTC()}
		if !yield(ns, &sl.publicKey, a) {
			return
		}
	}
}

// builder accumulates one delivery of a Source. Slots are collected in a flat
// slice first so the table can be allocated once at its final size.
type builder struct {
	service    string
	slots      []slot
	namespaces []string // of the slots, for the tails
	long       bool     // some namespace needs a tail
	arena      []byte
	skipped    int
}

func (b *builder) add(c Claim) error {
	if c.Service != b.service || c.ID == "" || len(c.ID) > maxClaimIDLen ||
		c.Namespace == "" || len(c.Namespace) > maxNamespaceLen {
		b.skipped++
		return nil
	}
	pub, err := ParsePublicKey(c.PublicKey)
	if err != nil {
		b.skipped++
		return nil
	}
	if len(b.arena)+len(c.ID) > math.MaxUint32 {
		return fmt.Errorf("claimcache: claim ids exceed %d bytes", uint32(math.MaxUint32))
	}
	sl := slot{
		publicKey:  [ed25519.PublicKeySize]byte(pub),
		approvedAt: c.ApprovedAt.UnixMilli(),
		idOff:      uint32(len(b.arena)),
		nsLen:      uint8(len(c.Namespace)),
		idLen:      uint8(len(c.ID)),
	}
	copy(sl.namespace[:], c.Namespace)
	b.long = b.long || len(c.Namespace) > inlineNamespace
	b.arena = append(b.arena, c.ID...)
	b.slots = append(b.slots, sl)
	b.namespaces = append(b.namespaces, c.Namespace)
	return nil
}

// maxSeeds bounds the seeds build tries. One fails only when two distinct
// tuples share all 64 bits of their hash (about 1 in 40 million at a million
// tuples) or a bucket exhausts its pilots, so a second seed all but always
// succeeds.
const maxSeeds = 4

// build returns the snapshot. When a tuple appears twice (the feed moved
// while it was paged), the first record wins.
func (b *builder) build(version string) (*snapshot, error) {
	s := &snapshot{arena: string(b.arena), version: version, skipped: b.skipped}
	n := len(b.slots)
	if n == 0 {
		return s, nil
	}
	s.pilots = make([]uint16, n/bucketLoad+1)
	s.table = make([]slot, n+n/(emptyEvery-1)+1)
	adviseHugePages(s.table)
	if b.long {
		s.tails = make([]tail, len(s.table))
		adviseHugePages(s.tails)
	}
	for range maxSeeds {
		s.seed = maphash.MakeSeed()
		if s.place(b) {
			return s, nil
		}
		clear(s.table)
		s.claims = 0
	}
	return nil, fmt.Errorf("claimcache: no perfect hash for %d claims in %d seeds", n, maxSeeds)
}

// member is a tuple in a bucket: its hash and its index in the builder.
type member struct {
	hash uint64
	j    int32
}

// place fills the table with b's tuples under s.seed, choosing each bucket's
// pilot, largest buckets first (while the table is emptiest). It reports
// false when the seed cannot separate two tuples.
func (s *snapshot) place(b *builder) bool {
	hashes := make([]uint64, len(b.slots))
	start := make([]int32, len(s.pilots)+1) // bucket k is members[start[k]:start[k+1]]
	for j := range b.slots {
		hashes[j] = s.hash(b.namespaces[j], &b.slots[j].publicKey)
		start[s.bucket(hashes[j])+1]++
	}
	for k := range s.pilots {
		start[k+1] += start[k]
	}
	members := make([]member, len(b.slots))
	next := slices.Clone(start[:len(s.pilots)])
	for j, h := range hashes { // in feed order, so a repeated tuple's first record comes first
		k := s.bucket(h)
		members[next[k]] = member{h, int32(j)}
		next[k]++
	}
	order := next // reused: the buckets, largest first
	for k := range order {
		order[k] = int32(k)
	}
	size := func(k int32) int32 { return start[k+1] - start[k] }
	slices.SortFunc(order, func(a, b int32) int { return int(size(b) - size(a)) })

	taken := make([]bool, len(s.table))
	var at []int
	for _, k := range order {
		bucket, ok := b.distinct(members[start[k]:start[k+1]])
		if !ok {
			return false
		}
		if len(bucket) == 0 {
			break // the rest are empty too
		}
		if s.pilots[k], ok = s.pilot(bucket, taken, &at); !ok {
			return false
		}
		for x, m := range bucket {
			i := at[x]
			taken[i], s.table[i] = true, b.slots[m.j]
			if ns := b.namespaces[m.j]; len(ns) > inlineNamespace {
				copy(s.tails[i][:], ns[inlineNamespace:])
			}
		}
		s.claims += len(bucket)
	}
	return true
}

// distinct drops, in place, the records of bucket that repeat an earlier
// one's tuple. It reports false when two different tuples share their hash:
// no pilot can separate them.
func (b *builder) distinct(bucket []member) ([]member, bool) {
	out := bucket[:0]
	for _, m := range bucket {
		x := slices.IndexFunc(out, func(o member) bool { return o.hash == m.hash })
		switch {
		case x < 0:
			out = append(out, m)
		case b.slots[out[x].j].publicKey != b.slots[m.j].publicKey || b.namespaces[out[x].j] != b.namespaces[m.j]:
			return nil, false
		}
	}
	return out, true
}

// pilot finds the first pilot that sends every tuple of bucket to a distinct
// free slot, leaving the slots in *at.
func (s *snapshot) pilot(bucket []member, taken []bool, at *[]int) (uint16, bool) {
	for p := range math.MaxUint16 + 1 {
		*at = (*at)[:0]
		for _, m := range bucket {
			i := s.position(m.hash, uint16(p))
			if taken[i] || slices.Contains(*at, i) {
				break
			}
			*at = append(*at, i)
		}
		if len(*at) == len(bucket) {
			return uint16(p), true
		}
	}
	return 0, false
}

// validKey reports whether publicKey can be looked up.
func validKey(publicKey []byte) bool { return len(publicKey) == ed25519.PublicKeySize }
