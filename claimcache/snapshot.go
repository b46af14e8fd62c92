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
	"unsafe"

	"github.com/idnhq/idn/internal/heldmem"
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

// inlineNamespace is how much of a namespace its slot holds. A longer one
// keeps the rest (at most maxNamespaceLen-inlineNamespace bytes) in the
// next cell of the table, its tail cell.
const inlineNamespace = 16

// slot is one cell of a snapshot's table, one cache line long: the tuple
// itself, compared exactly (the raw public key and the namespace's first
// bytes), and the claim's metadata. The claim id is in the snapshot's arena
// at idOff. An empty slot has idLen 0. So has the tail cell that follows
// the slot of a namespace over inlineNamespace bytes, and it matches no
// lookup. It holds the namespace's bytes past inlineNamespace, zero-padded,
// in publicKey and then namespace. While a builder collects claims, the
// tail follows the claim id in its arena instead.
type slot struct {
	publicKey  [ed25519.PublicKeySize]byte
	approvedAt int64 // Unix milliseconds
	idOff      uint32
	nsLen      uint8
	idLen      uint8
	namespace  [inlineNamespace]byte
}

// Shape of the perfect hash: tuples per bucket on average, and the share of
// the table's cells that stay empty. Empty cells keep the search for the
// last buckets' pilots short. 1 in emptyEvery stays empty for slots alone,
// and 1 in emptyEveryLong for a slot and its tail cell, which need two
// free cells side by side.
const (
	bucketLoad     = 4
	emptyEvery     = 20
	emptyEveryLong = 5
)

// snapshot is an immutable view of one service's approved claims. They sit
// in a table addressed by a perfect hash built for exactly those tuples:
// each has a slot of its own that a lookup computes. So every lookup, hit
// or miss, reads one slot (one cache line) and compares it exactly. For a
// namespace over inlineNamespace bytes it also reads the tail cell after
// the slot. The two cells' addresses are known together, so the processor
// reads them from memory side by side. A lookup costs one memory read's
// latency at any namespace length.
//
// The hash follows PTHash (Pibiri and Trani, SIGIR 2021), with buckets of
// uniform expected size and plain 16-bit pilots. A seeded hash of the tuple
// picks a bucket of about bucketLoad tuples. The bucket's pilot, chosen when
// the snapshot is built, sends each of them to a free slot. The pilots take
// half a byte per claim and mostly stay in the processor's caches. So the
// slot (with its tail cell) is usually the lookup's only read from memory.
// A hit's claim id is a string in the arena, which the lookup does not
// read.
//
// A snapshot holds about 94 bytes per claim with namespaces of up to
// inlineNamespace bytes: 67 for the slot and its share of the empty ones,
// then the claim id and half a byte of pilot. A longer namespace takes 93
// more, for its tail cell and the larger share of empty cells it needs.
// BenchmarkSnapshotMemory1M measures it.
type snapshot struct {
	pilots  []uint16
	table   []slot
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

// hashSlot returns the hash of the tuple a builder's slot holds, equal to
// hash of its namespace and key.
func (s *snapshot) hashSlot(sl *slot, arena []byte) uint64 {
	var buf [maxNamespaceLen]byte
	ns := buf[:sl.nsLen]
	n := copy(ns, sl.namespace[:])
	copy(ns[n:], arena[sl.idOff+uint32(sl.idLen):])
	return maphash.Bytes(s.seed, sl.publicKey[:]) ^ bits.RotateLeft64(maphash.Bytes(s.seed, ns), 31)
}

// bucket returns the bucket of a tuple's hash, from its high bits.
func (s *snapshot) bucket(h uint64) int {
	b, _ := bits.Mul64(h, uint64(len(s.pilots)))
	return int(b)
}

// position returns the slot that pilot sends a tuple's hash to. Tuples of one
// bucket share their hash's high bits (which chose the bucket). So the slot
// comes from the low bits: rotated to the top, mixed with the pilot, and
// multiplied by an odd constant. The product's high bits scale to the
// table's size. One multiplication, not a full mixing function: it is on
// the path of every lookup, and the build finds pilots as readily.
func (s *snapshot) position(h uint64, pilot uint16, m int) int {
	x := (bits.RotateLeft64(h, 32) ^ (uint64(pilot)+1)*0x9e3779b97f4a7c15) * 0xff51afd7ed558ccd
	i, _ := bits.Mul64(x, uint64(m))
	return int(i)
}

// holds reports whether the slot at i is the tuple's. It compares in 64-bit
// words. It branches on the outcome and on the length of the namespace
// asked for, which the processor predicts. A lookup spends its time waiting
// for the slot to arrive from memory. A branch on the slot's contents would
// keep the processor from working ahead meanwhile, and from asking for a
// tail cell at the same time as the slot.
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
	if len(namespace) > inlineNamespace && i+1 < len(s.table) {
		var tail [maxNamespaceLen - inlineNamespace]byte // zero-padded, as in the tail cell
		copy(tail[:], namespace[inlineNamespace:])
		t := &s.table[i+1]
		diff |= (le.Uint64(t.publicKey[0:]) ^ le.Uint64(tail[0:])) |
			(le.Uint64(t.publicKey[8:]) ^ le.Uint64(tail[8:])) |
			(le.Uint64(t.publicKey[16:]) ^ le.Uint64(tail[16:])) |
			(le.Uint64(t.publicKey[24:]) ^ le.Uint64(tail[24:])) |
			(le.Uint64(t.namespace[0:]) ^ le.Uint64(tail[32:])) |
			(le.Uint64(t.namespace[8:]) ^ le.Uint64(tail[40:]))
	}
	return diff == 0 && sl.idLen != 0
}

// setTail writes tail, the bytes of a namespace past inlineNamespace, into
// a tail cell.
func (t *slot) setTail(tail []byte) {
	n := copy(t.publicKey[:], tail)
	copy(t.namespace[:], tail[n:])
}

// appendTail appends the namespace bytes a tail cell holds, n of them.
func (t *slot) appendTail(dst []byte, n int) []byte {
	dst = append(dst, t.publicKey[:min(n, len(t.publicKey))]...)
	return append(dst, t.namespace[:max(n-len(t.publicKey), 0)]...)
}

// find returns the claim id and approval time (Unix milliseconds) of the
// tuple, if the snapshot holds it. It returns scalars rather than an
// Approval, which the caller builds once. A lookup is mostly a wait for one
// slot from memory. The fewer instructions it runs besides, the sooner the
// processor can start the next lookup's read.
func (s *snapshot) find(namespace string, key *[ed25519.PublicKeySize]byte) (id string, approvedAt int64, ok bool) {
	if len(s.table) == 0 {
		return "", 0, false
	}
	h := s.hash(namespace, key)
	i := s.position(h, s.pilots[s.bucket(h)], len(s.table))
	if !s.holds(i, namespace, key) {
		return "", 0, false
	}
	sl := &s.table[i]
	return s.arena[sl.idOff : sl.idOff+uint32(sl.idLen)], sl.approvedAt, true
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
		buf := append(make([]byte, 0, maxNamespaceLen), sl.namespace[:min(n, inlineNamespace)]...)
		if n > inlineNamespace {
			buf = s.table[i+1].appendTail(buf, n-inlineNamespace)
		}
		a := Approval{ClaimID: s.arena[sl.idOff : sl.idOff+uint32(sl.idLen)], ApprovedAt: time.UnixMilli(sl.approvedAt).UTC()}
		if !yield(string(buf), &sl.publicKey, a) {
			return
		}
	}
}

// builder accumulates one delivery of a Source in the slots of the table to
// be, in arrival order. build moves them to their places in that same
// array. So a refresh holds each claim once, and the feed's decoded records
// not at all.
type builder struct {
	service string
	held    *heldmem.Counter // the cache's, which counts the arrays built
	slots   []slot
	arena   []byte // claim ids, each followed by its namespace's tail
	long    int    // records whose namespace needs a tail cell
	skipped int
}

func (b *builder) add(c Claim) error {
	if c.Service != b.service || c.ID == "" || len(c.ID) > maxClaimIDLen ||
		c.Namespace == "" || len(c.Namespace) > maxNamespaceLen {
		b.skipped++
		return nil
	}
	sl := slot{
		approvedAt: c.ApprovedAt.UnixMilli(),
		idOff:      uint32(len(b.arena)),
		nsLen:      uint8(len(c.Namespace)),
		idLen:      uint8(len(c.ID)),
	}
	if !parseKeyInto(&sl.publicKey, c.PublicKey) {
		b.skipped++
		return nil
	}
	tail := max(len(c.Namespace)-inlineNamespace, 0)
	if len(b.arena)+len(c.ID)+tail > math.MaxUint32 {
		return fmt.Errorf("claimcache: claim ids exceed %d bytes", uint32(math.MaxUint32))
	}
	copy(sl.namespace[:], c.Namespace)
	arenaCap, slotsCap := cap(b.arena), cap(b.slots)
	b.arena = append(b.arena, c.ID...)
	b.arena = append(b.arena, c.Namespace[len(c.Namespace)-tail:]...)
	b.slots = append(b.slots, sl)
	holdGrown(b.held, b.arena, arenaCap)
	holdGrown(b.held, b.slots, slotsCap)
	if tail > 0 {
		b.long++
	}
	return nil
}

// maxReserve bounds the claims reserve makes room for, so that a feed's
// claimed total cannot make the gateway allocate more than that at once.
const maxReserve = 1 << 24

// tableSize is the number of cells of the table for n claims, long of them
// with a namespace that needs a tail cell.
func tableSize(n, long int) int {
	short := n - long
	return short + short/(emptyEvery-1) + 2*long + 2*long/(emptyEveryLong-1) + 1
}

// reserve makes room for total claims in all, when a Source knows how many
// it will deliver. The array that collects them then becomes the table
// itself, without a copy. The arena is made as large as the claims so far
// say it will need, plus a sixteenth, so that it is not copied as it grows
// either. Both are advised to use huge pages, so filling them costs a page
// fault per 2 MiB rather than per 4 KiB.
func (b *builder) reserve(total int) {
	if total <= len(b.slots) || total > maxReserve {
		return
	}
	b.slots = slices.Grow(b.slots, tableSize(total, 0)-len(b.slots))
	hold(b.held, b.slots)
	adviseHugePages(b.slots[:cap(b.slots)]) // the table: see permute
	if len(b.slots) > 0 {
		perClaim := float64(len(b.arena)) / float64(len(b.slots))
		b.arena = slices.Grow(b.arena, int(perClaim*float64(total)*17/16)-len(b.arena))
		hold(b.held, b.arena)
		adviseHugePages(b.arena[:cap(b.arena)])
	}
}

// maxSeeds bounds the seeds build tries. A seed fails only when two
// distinct tuples share all 64 bits of their hash (about 1 in 40 million
// at a million tuples), or a bucket exhausts its pilots. Each seed after
// the first also has a table a sixteenth larger, with more room for the
// pilots to find. So a second seed all but always succeeds.
const maxSeeds = 4

// build returns the snapshot, and uses up b. When a tuple appears twice (the
// feed moved while it was paged), the first record wins.
func (b *builder) build(version string) (*snapshot, error) {
	s := &snapshot{version: version, skipped: b.skipped}
	n := len(b.slots)
	if n == 0 {
		s.arena = string(b.arena)
		return s, nil
	}
	if n >= math.MaxUint32/2 {
		return nil, fmt.Errorf("claimcache: %d claims are too many for one snapshot", n)
	}
	s.pilots = make([]uint16, n/bucketLoad+1)
	hold(b.held, s.pilots)
	m := tableSize(n, b.long)
	for range maxSeeds {
		s.seed = maphash.MakeSeed()
		if pos, ok := s.place(b, m); ok {
			s.table = b.permute(pos) // advised to use huge pages
			s.arena = b.finish(s.table)
			b.slots, b.arena = nil, nil
			return s, nil
		}
		s.claims = 0
		m += m / 16
	}
	return nil, fmt.Errorf("claimcache: no perfect hash for %d claims in %d seeds", n, maxSeeds)
}

// member is a tuple in a bucket: its hash, its index in the builder, and
// whether it needs a tail cell.
type member struct {
	hash uint64
	j    int32
	long bool
}

// unplaced marks, in place's positions, a record that has no slot (it
// repeats an earlier record's tuple) or, in permute, a slot that is empty.
const unplaced = math.MaxUint32

// place chooses each bucket's pilot under s.seed, largest buckets first
// (while the table is emptiest), for a table of m slots, and returns the
// slot of each of b's records (and m-len(b.slots) unplaced entries after
// them). It reports false when the seed cannot separate two tuples.
func (s *snapshot) place(b *builder, m int) ([]uint32, bool) {
	hashes := make([]uint64, len(b.slots))
	start := make([]int32, len(s.pilots)+1) // bucket k is members[start[k]:start[k+1]]
	hold(b.held, hashes)
	hold(b.held, start)
	for j := range b.slots {
		hashes[j] = s.hashSlot(&b.slots[j], b.arena)
		start[s.bucket(hashes[j])+1]++
	}
	for k := range s.pilots {
		start[k+1] += start[k]
	}
	members := make([]member, len(b.slots))
	next := slices.Clone(start[:len(s.pilots)])
	hold(b.held, members)
	hold(b.held, next)
	for j, h := range hashes { // in feed order, so a repeated tuple's first record comes first
		k := s.bucket(h)
		members[next[k]] = member{h, int32(j), b.slots[j].nsLen > inlineNamespace}
		next[k]++
	}
	order := next // reused: the buckets, largest first
	for k := range order {
		order[k] = int32(k)
	}
	size := func(k int32) int32 { return start[k+1] - start[k] }
	slices.SortFunc(order, func(a, b int32) int { return int(size(b) - size(a)) })

	pos := make([]uint32, m)
	hold(b.held, pos)
	for j := range pos {
		pos[j] = unplaced
	}
	taken := make([]bool, m)
	hold(b.held, taken)
	var at []int
	for _, k := range order {
		bucket, ok := b.distinct(members[start[k]:start[k+1]])
		if !ok {
			return nil, false
		}
		if len(bucket) == 0 {
			break // the rest are empty too
		}
		if s.pilots[k], ok = s.pilot(bucket, taken, m, &at); !ok {
			return nil, false
		}
		x := 0
		for _, mb := range bucket {
			pos[mb.j] = uint32(at[x])
			if x++; mb.long {
				x++
			}
		}
		for _, i := range at {
			taken[i] = true
		}
		s.claims += len(bucket)
	}
	return pos, true
}

// permute moves every record of b to its slot pos[j] (dropping the unplaced
// ones) in an array of len(pos) slots, and returns it. That is b's own
// array when reserve made it that large, so that a refresh holds each
// claim once. It follows each chain of displaced records to an empty slot,
// so every record moves once.
func (b *builder) permute(pos []uint32) []slot {
	n, m := len(b.slots), len(pos)
	var table []slot
	if c := cap(b.slots); c >= m && c <= m+m/16 { // reserved for this table
		table = b.slots[:m]
		adviseHugePages(table) // again, when it was not reserve that made it
		clear(table[n:])
	} else { // one copy, so that the table holds no more than m slots
		table = make([]slot, m)
		hold(b.held, table)
		adviseHugePages(table) // before the copy touches its pages
		copy(table, b.slots)
	}
	b.slots = nil
	for i := range n {
		p := pos[i]
		if p == uint32(i) {
			continue
		}
		if p == unplaced { // a repeat, or a slot emptied by an earlier chain
			table[i] = slot{}
			continue
		}
		moving := table[i]
		table[i], pos[i] = slot{}, unplaced
		for {
			displaced, next := table[p], pos[p]
			table[p], pos[p] = moving, p
			if next == unplaced {
				break
			}
			moving, p = displaced, next
		}
	}
	return table
}

// finish moves each long namespace's tail from b's arena into the tail cell
// after its slot, and returns the snapshot's arena: the claim ids alone, in
// the table's order, which the slots' idOff are changed to. When b's arena
// holds no tails and little room to spare, it is the snapshot's, as is.
func (b *builder) finish(table []slot) string {
	if b.long == 0 && cap(b.arena)-len(b.arena) <= len(b.arena)/8 {
		return unsafe.String(unsafe.SliceData(b.arena), len(b.arena)) // b is used up; nothing writes the arena again
	}
	size := 0
	for i := range table {
		size += int(table[i].idLen)
	}
	arena := make([]byte, 0, size)
	hold(b.held, arena)
	for i := range table {
		sl := &table[i]
		if sl.idLen == 0 {
			continue
		}
		end := sl.idOff + uint32(sl.idLen)
		if n := int(sl.nsLen) - inlineNamespace; n > 0 {
			table[i+1].setTail(b.arena[end : end+uint32(n)])
		}
		off := len(arena)
		arena = append(arena, b.arena[sl.idOff:end]...)
		sl.idOff = uint32(off)
	}
	return unsafe.String(unsafe.SliceData(arena), len(arena)) // arena is not written again
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
		case !b.sameTuple(out[x].j, m.j):
			return nil, false
		}
	}
	return out, true
}

// sameTuple reports whether records i and j hold one tuple.
func (b *builder) sameTuple(i, j int32) bool {
	x, y := &b.slots[i], &b.slots[j]
	if x.publicKey != y.publicKey || x.nsLen != y.nsLen || x.namespace != y.namespace {
		return false
	}
	tail := uint32(max(int(x.nsLen)-inlineNamespace, 0))
	xt, yt := x.idOff+uint32(x.idLen), y.idOff+uint32(y.idLen)
	return string(b.arena[xt:xt+tail]) == string(b.arena[yt:yt+tail])
}

// pilot finds the first pilot that sends every tuple of bucket to a distinct
// free slot of a table of m, followed, for a long namespace, by a free tail
// cell. It leaves in *at the cells, in the bucket's order: each tuple's
// slot, then its tail cell when it has one.
func (s *snapshot) pilot(bucket []member, taken []bool, m int, at *[]int) (uint16, bool) {
	free := func(i int) bool { return i < m && !taken[i] && !slices.Contains(*at, i) }
	for p := range math.MaxUint16 + 1 {
		*at = (*at)[:0]
		placed := 0
		for _, mb := range bucket {
			i := s.position(mb.hash, uint16(p), m)
			if !free(i) {
				break
			}
			*at = append(*at, i)
			if mb.long {
				if !free(i + 1) {
					break
				}
				*at = append(*at, i+1)
			}
			placed++
		}
		if placed == len(bucket) {
			return uint16(p), true
		}
	}
	return 0, false
}

// validKey reports whether publicKey can be looked up.
func validKey(publicKey []byte) bool { return len(publicKey) == ed25519.PublicKeySize }
