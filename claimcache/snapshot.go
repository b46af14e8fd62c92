package claimcache

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Approval is what a successful lookup returns: enough to log the decision.
type Approval struct {
	ClaimID    string
	ApprovedAt time.Time
}

// tupleKey identifies <namespace, public key> within a service: the first 16
// bytes of SHA-256 over the length-prefixed namespace and the raw key. A false
// match needs a second preimage of 128 bits against one of the approved
// tuples, so a fixed-size key is as good as the tuple itself and lets a whole
// table slot fit in half a cache line. The all-zero key marks an empty slot,
// so a (never expected) zero hash is nudged to another value.
type tupleKey [16]byte

func makeTupleKey(namespace string, publicKey []byte) tupleKey {
	var buf [128]byte
	b := binary.AppendUvarint(buf[:0], uint64(len(namespace)))
	b = append(b, namespace...)
	b = append(b, publicKey...)
	sum := sha256.Sum256(b)
	k := tupleKey(sum[:16])
	if k == (tupleKey{}) {
		k[15] = 1
	}
	return k
}

// slot is one cell of a snapshot's open-addressing table: the tuple key and
// the claim's metadata (its id as a span of the id arena, its approval time
// in Unix milliseconds). 32 bytes, so a lookup usually touches one cache line.
type slot struct {
	key            tupleKey
	idStart, idEnd uint32
	approvedAt     int64
}

// snapshot is an immutable view of one service's approved claims: a linear
// probing hash table at most 3/4 full, indexed by the key's second half
// (uniform, being a hash). A Go map would cost two to three cache misses per
// lookup at a million entries; this table costs about one.
type snapshot struct {
	table   []slot // length a power of two
	ids     string // every claim id, concatenated
	version string
	claims  int // distinct tuples
	skipped int // records that were malformed or for another service
}

func (s *snapshot) lookup(namespace string, publicKey []byte) (Approval, bool) {
	if len(s.table) == 0 {
		return Approval{}, false
	}
	k := makeTupleKey(namespace, publicKey)
	mask := uint64(len(s.table) - 1)
	for i := binary.LittleEndian.Uint64(k[8:]) & mask; ; i = (i + 1) & mask {
		sl := &s.table[i]
		switch sl.key {
		case k:
			return Approval{ClaimID: s.ids[sl.idStart:sl.idEnd], ApprovedAt: time.UnixMilli(sl.approvedAt).UTC()}, true
		case tupleKey{}:
			return Approval{}, false
		}
	}
}

// insert adds sl unless its key is present; it reports whether it did.
func (s *snapshot) insert(sl slot) bool {
	mask := uint64(len(s.table) - 1)
	for i := binary.LittleEndian.Uint64(sl.key[8:]) & mask; ; i = (i + 1) & mask {
		switch s.table[i].key {
		case sl.key:
			return false
		case tupleKey{}:
			s.table[i] = sl
			return true
		}
	}
}

// builder accumulates one delivery of a Source. Claims are collected in flat
// slices first so the map can be allocated once at its final size.
type builder struct {
	service string
	slots   []slot
	ids     []byte
	skipped int
}

// maxClaimIDLen bounds a claim id; longer ones are skipped as malformed.
const maxClaimIDLen = 256

func (b *builder) add(c Claim) error {
	if c.Service != b.service || c.ID == "" || len(c.ID) > maxClaimIDLen || c.Namespace == "" {
		b.skipped++
		return nil
	}
	pub, err := ParsePublicKey(c.PublicKey)
	if err != nil {
		b.skipped++
		return nil
	}
	if len(b.ids)+len(c.ID) > math.MaxUint32 {
		return fmt.Errorf("claimcache: claim ids exceed %d bytes", uint32(math.MaxUint32))
	}
	start := uint32(len(b.ids))
	b.ids = append(b.ids, c.ID...)
	b.slots = append(b.slots, slot{
		key:     makeTupleKey(c.Namespace, pub),
		idStart: start, idEnd: uint32(len(b.ids)),
		approvedAt: c.ApprovedAt.UnixMilli(),
	})
	return nil
}

// build returns the snapshot. When a tuple appears twice (the feed moved
// while it was paged), the first record wins.
func (b *builder) build(version string) *snapshot {
	size := 1
	for size*3 < len(b.slots)*4+4 { // keep the table at most 3/4 full, never full
		size *= 2
	}
	table := make([]slot, size)
	adviseHugePages(table)
	s := &snapshot{
		table:   table,
		ids:     string(b.ids),
		version: version,
		skipped: b.skipped,
	}
	for _, sl := range b.slots {
		if s.insert(sl) {
			s.claims++
		}
	}
	return s
}

// validKey reports whether publicKey can be looked up.
func validKey(publicKey []byte) bool { return len(publicKey) == ed25519.PublicKeySize }
