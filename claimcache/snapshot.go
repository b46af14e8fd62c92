package claimcache

import (
	"crypto/ed25519"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"time"
)

// Approval is what a successful lookup returns: enough to log the decision.
type Approval struct {
	ClaimID    string
	ApprovedAt time.Time
}

// Limits on one claim's fields, so that they fit a slot; a claim over either
// is skipped as malformed. Namespaces are at most 64 characters by the spec.
const (
	maxNamespaceLen = 64
	maxClaimIDLen   = math.MaxUint8
)

// inlineNamespace is how much of a namespace its slot holds; the rest, when
// there is any, is in the slot's tail.
const inlineNamespace = 16

// slot is one cell of a snapshot's open-addressing table, one cache line
// long: the tuple itself, compared exactly (the raw public key and the
// namespace's first bytes), and the claim's metadata. The claim id is in the
// snapshot's arena at idOff.
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

// snapshot is an immutable view of one service's approved claims: a linear
// probing hash table at most 3/4 full, indexed by a seeded hash of the tuple
// and resolved by exact comparison.
//
// Beside the table, one byte per slot holds 8 bits of the slot's hash (0:
// empty). That array is small enough to stay in the processor's cache, so
// probing happens there: a hit usually reads one slot, one cache line, and a
// miss usually reads none. When some namespace is longer than
// inlineNamespace, a second array, parallel to the table, holds the tails;
// its address does not depend on the slot's contents, so the two reads can
// overlap, though BenchmarkLookup1M still measures such lookups slower.
type snapshot struct {
	tags    []uint8
	table   []slot // as long as tags
	tails   []tail // nil, or as long as tags
	arena   string // claim ids
	seed    maphash.Seed
	version string
	claims  int // distinct tuples
	skipped int // records that were malformed or for another service
}

// hash returns where the probe for a tuple starts and the tag its slot
// carries. The seed is random per snapshot, so callers cannot aim their keys
// at one run of the table.
func (s *snapshot) hash(namespace string, publicKey *[ed25519.PublicKeySize]byte) (int, uint8) {
	h := maphash.Bytes(s.seed, publicKey[:]) ^ bits.RotateLeft64(maphash.String(s.seed, namespace), 31)
	i, _ := bits.Mul64(h, uint64(len(s.table))) // the high bits of h pick the start
	tag := uint8(h)                             // the low bits make the tag
	if tag == 0 {
		tag = 1
	}
	return int(i), tag
}

// holds reports whether the slot at i is the tuple's.
func (s *snapshot) holds(i int, namespace string, publicKey *[ed25519.PublicKeySize]byte) bool {
	sl := &s.table[i]
	if sl.publicKey != *publicKey || int(sl.nsLen) != len(namespace) {
		return false
	}
	head := min(len(namespace), inlineNamespace)
	if string(sl.namespace[:head]) != namespace[:head] {
		return false
	}
	return len(namespace) == head || string(s.tails[i][:len(namespace)-head]) == namespace[head:]
}

// find returns the position of the tuple's slot and true, or the empty
// position where it would go and false.
func (s *snapshot) find(namespace string, publicKey *[ed25519.PublicKeySize]byte) (int, uint8, bool) {
	i, tag := s.hash(namespace, publicKey)
	for {
		switch s.tags[i] {
		case 0:
			return i, tag, false
		case tag:
			if s.holds(i, namespace, publicKey) {
				return i, tag, true
			}
		}
		if i++; i == len(s.table) {
			i = 0
		}
	}
}

func (s *snapshot) lookup(namespace string, publicKey []byte) (Approval, bool) {
	if len(s.table) == 0 || len(publicKey) != ed25519.PublicKeySize {
		return Approval{}, false
	}
	i, _, ok := s.find(namespace, (*[ed25519.PublicKeySize]byte)(publicKey))
	if !ok {
		return Approval{}, false
	}
	sl := &s.table[i]
	return Approval{
		ClaimID:    s.arena[sl.idOff : sl.idOff+uint32(sl.idLen)],
		ApprovedAt: time.UnixMilli(sl.approvedAt).UTC(),
	}, true
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

// build returns the snapshot. When a tuple appears twice (the feed moved
// while it was paged), the first record wins.
func (b *builder) build(version string) *snapshot {
	s := &snapshot{
		arena:   string(b.arena),
		seed:    maphash.MakeSeed(),
		version: version,
		skipped: b.skipped,
	}
	if len(b.slots) == 0 {
		return s
	}
	n := len(b.slots) + len(b.slots)/3 + 1 // at most 3/4 full, never full
	s.tags, s.table = make([]uint8, n), make([]slot, n)
	adviseHugePages(s.table)
	if b.long {
		s.tails = make([]tail, n)
		adviseHugePages(s.tails)
	}
	for j := range b.slots {
		ns := b.namespaces[j]
		if i, tag, found := s.find(ns, &b.slots[j].publicKey); !found {
			s.tags[i], s.table[i] = tag, b.slots[j]
			if len(ns) > inlineNamespace {
				copy(s.tails[i][:], ns[inlineNamespace:])
			}
			s.claims++
		}
	}
	return s
}

// validKey reports whether publicKey can be looked up.
func validKey(publicKey []byte) bool { return len(publicKey) == ed25519.PublicKeySize }
