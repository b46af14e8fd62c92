package claimcache

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/idnhq/idn/internal/heldmem"
)

// The snapshot matches tuples exactly: a lookup that differs from an approved
// tuple in any byte of the namespace or key misses, whether the namespace
// sits in its slot or runs into a tail, and however many tuples share a key.
func TestSnapshotMatchesExactly(t *testing.T) {
	t.Parallel()
	key := func(b byte) ed25519.PublicKey { k := make([]byte, 32); k[0], k[31] = b, b; return k }
	short, long := "alice", "the-research-agents-of-acme-corporation" // inline, arena
	b := testBuilder("svc")
	approved := []Claim{
		{ID: "clm_short", Namespace: short, PublicKey: format(key(1))},
		{ID: "clm_long", Namespace: long, PublicKey: format(key(2))},
		{ID: "clm_shared_a", Namespace: "team-a", PublicKey: format(key(3))},
		{ID: "clm_shared_b", Namespace: "team-b", PublicKey: format(key(3))},
		{ID: "clm_duplicate", Namespace: short, PublicKey: format(key(1))}, // the first record wins
		{ID: "clm_edge", Namespace: strings.Repeat("e", inlineNamespace), PublicKey: format(key(4))},
		{ID: "clm_edge_long", Namespace: strings.Repeat("e", inlineNamespace+1), PublicKey: format(key(4))},
	}
	for i, c := range approved {
		c.Service, c.ApprovedAt = "svc", time.UnixMilli(int64(i))
		if err := b.add(c); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []Claim{
		{ID: strings.Repeat("i", maxClaimIDLen+1), Namespace: "x", PublicKey: format(key(9)), Service: "svc"},
		{ID: "clm_x", Namespace: strings.Repeat("n", maxNamespaceLen+1), PublicKey: format(key(9)), Service: "svc"},
		{ID: "clm_x", Namespace: "x", PublicKey: format(key(9)), Service: "other"},
	} {
		if err := b.add(bad); err != nil {
			t.Fatal(err)
		}
	}
	s := mustBuild(t, b)
	if s.claims != 6 || s.skipped != 3 {
		t.Fatalf("claims %d, skipped %d; want 6 and 3", s.claims, s.skipped)
	}
	flipped := func(k ed25519.PublicKey, i int) ed25519.PublicKey {
		c := append(ed25519.PublicKey(nil), k...)
		c[i] ^= 0x40
		return c
	}
	for _, tt := range []struct {
		namespace string
		key       ed25519.PublicKey
		want      string // claim id; "" for a miss
	}{
		{short, key(1), "clm_short"},
		{long, key(2), "clm_long"},
		{"team-a", key(3), "clm_shared_a"},
		{"team-b", key(3), "clm_shared_b"},
		{strings.Repeat("e", inlineNamespace), key(4), "clm_edge"},
		{strings.Repeat("e", inlineNamespace+1), key(4), "clm_edge_long"},
		{"Alice", key(1), ""},
		{"alic", key(1), ""},
		{"alice\x00", key(1), ""},
		{short, key(2), ""},
		{short, flipped(key(1), 0), ""},
		{short, flipped(key(1), 31), ""},
		{long[:len(long)-1] + "M", key(2), ""},
		{long + "-", key(2), ""},
		{long, flipped(key(2), 17), ""},
		{"team-c", key(3), ""},
		{strings.Repeat("e", inlineNamespace+2), key(4), ""},
		{strings.Repeat("e", inlineNamespace-1) + "f", key(4), ""},
		{long[:10] + "X" + long[11:], key(2), ""},
		{"", key(1), ""},
	} {
		id, _, ok := s.find(tt.namespace, (*[ed25519.PublicKeySize]byte)(tt.key))
		if ok != (tt.want != "") || id != tt.want {
			t.Errorf("find(%q, %x…) = %q, %v; want %q", tt.namespace, tt.key[:2], id, ok, tt.want)
		}
	}
	// A lookup of any other tuple lands on some slot; the comparison must
	// refuse it there. So every approved tuple's own slot is checked against
	// each change of one byte of its namespace or key, and a byte more or
	// less of namespace.
	for _, c := range approved {
		pub, err := ParsePublicKey(c.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		k := (*[ed25519.PublicKeySize]byte)(pub)
		h := s.hash(c.Namespace, k)
		i := s.position(h, s.pilots[s.bucket(h)], len(s.table))
		if !s.holds(i, c.Namespace, k) {
			t.Fatalf("%s is not in its slot", c.ID)
		}
		ns := []byte(c.Namespace)
		for at := range ns {
			for _, d := range []byte{0x01, 0x20, 0x80} {
				ns[at] ^= d
				if s.holds(i, string(ns), k) {
					t.Fatalf("slot of %s holds %q", c.ID, ns)
				}
				ns[at] ^= d
			}
		}
		for _, v := range []string{c.Namespace + "x", c.Namespace + "\x00", c.Namespace[:len(c.Namespace)-1]} {
			if s.holds(i, v, k) {
				t.Fatalf("slot of %s holds %q", c.ID, v)
			}
		}
		for at := range k {
			other := *k
			other[at] ^= 0x10
			if s.holds(i, c.Namespace, &other) {
				t.Fatalf("slot of %s holds a key that differs in byte %d", c.ID, at)
			}
		}
	}
	// An empty slot is all zeros: it matches no tuple, not even the zero one.
	empty := 0
	for i := range s.table {
		if s.table[i].idLen == 0 {
			empty++
			if s.holds(i, "", &[ed25519.PublicKeySize]byte{}) {
				t.Fatalf("empty slot %d matched", i)
			}
		}
	}
	if empty == 0 {
		t.Fatal("no empty slot to check")
	}
	if _, _, ok := mustBuild(t, testBuilder("svc")).find(short, (*[ed25519.PublicKeySize]byte)(key(1))); ok {
		t.Error("an empty snapshot matched")
	}
}

func format(k ed25519.PublicKey) string { return "ed25519:" + base64.StdEncoding.EncodeToString(k) }

func mustBuild(t testing.TB, b *builder) *snapshot {
	t.Helper()
	s, err := b.build("v1")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A bucket keeps the first record of a repeated tuple, and refuses two
// different tuples with one hash, which no pilot could separate.
func TestDistinctDropsRepeatsAndRefusesHashCollisions(t *testing.T) {
	t.Parallel()
	b := testBuilder("svc")
	k := make([]byte, 32)
	for _, c := range []Claim{
		{ID: "clm_a", Namespace: "alice"}, {ID: "clm_a_again", Namespace: "alice"}, {ID: "clm_b", Namespace: "bob"},
	} {
		c.PublicKey, c.Service = format(k), "svc"
		if err := b.add(c); err != nil {
			t.Fatal(err)
		}
	}
	got, ok := b.distinct([]member{{hash: 1, j: 0}, {hash: 2, j: 2}, {hash: 1, j: 1}})
	if want := []member{{hash: 1, j: 0}, {hash: 2, j: 2}}; !ok || !slices.Equal(got, want) {
		t.Fatalf("distinct = %v, %v; want %v, true", got, ok, want)
	}
	if _, ok := b.distinct([]member{{hash: 1, j: 0}, {hash: 1, j: 2}}); ok {
		t.Fatal("two tuples with one hash accepted")
	}
}

// BenchmarkBuild1M builds the snapshot of 1,000,000 claims already parsed:
// the part of a refresh that comes after the feed is read.
func BenchmarkBuild1M(b *testing.B) {
	bl := testBuilder("svc")
	k := make([]byte, ed25519.PublicKeySize)
	for i := range 1_000_000 {
		binary.LittleEndian.PutUint64(k, uint64(i)*0x9e3779b97f4a7c15)
		c := Claim{ID: "clm_" + strconv.Itoa(i), Namespace: "agent-" + strconv.Itoa(i), PublicKey: format(k), Service: "svc"}
		if err := bl.add(c); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		b.StopTimer()
		fresh := &builder{service: bl.service, held: bl.held, slots: slices.Clone(bl.slots), arena: bl.arena}
		b.StartTimer()
		if _, err := fresh.build("v"); err != nil {
			b.Fatal(err)
		}
	}
}

// Every size of snapshot finds each of its tuples, whatever the number of
// buckets and however full the last one.
func TestSnapshotFindsEveryTupleAtEverySize(t *testing.T) {
	t.Parallel()
	for n := range 200 {
		b := testBuilder("svc")
		k := make([]byte, ed25519.PublicKeySize)
		for i := range n {
			k[i%ed25519.PublicKeySize]++
			c := Claim{ID: fmt.Sprint("clm_", i), Namespace: fmt.Sprint("ns-", i%7), PublicKey: format(k), Service: "svc"}
			if err := b.add(c); err != nil {
				t.Fatal(err)
			}
		}
		tuples := slices.Clone(b.slots)
		s := mustBuild(t, b)
		if s.claims != n {
			t.Fatalf("n=%d: %d claims", n, s.claims)
		}
		for j := range tuples {
			id, _, ok := s.find(fmt.Sprint("ns-", j%7), &tuples[j].publicKey)
			if want := fmt.Sprint("clm_", j); !ok || id != want {
				t.Fatalf("n=%d: tuple %d: %q, %v; want %q", n, j, id, ok, want)
			}
		}
	}
}

// A builder told the total beforehand collects its claims in the table's
// own array, and a table built from fewer claims than told is copied to
// its size, so that no snapshot keeps room it does not use.
func TestReserveBuildsInPlace(t *testing.T) {
	t.Parallel()
	fill := func(b *builder, n int) {
		k := make([]byte, ed25519.PublicKeySize)
		for i := range n {
			binary.LittleEndian.PutUint32(k, uint32(i))
			if err := b.add(Claim{ID: fmt.Sprint("clm_", i), Namespace: "ns", PublicKey: format(k), Service: "svc"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	const n = 10_000
	b := testBuilder("svc")
	b.reserve(n)
	array := unsafe.SliceData(b.slots)
	fill(b, n)
	if s := mustBuild(t, b); unsafe.SliceData(s.table) != array || len(s.table) != tableSize(n, 0) || s.claims != n {
		t.Errorf("reserved: table of %d slots (cap %d) for %d claims, in the reserved array: %v", len(s.table), cap(s.table), s.claims, unsafe.SliceData(s.table) == array)
	}
	b = testBuilder("svc")
	b.reserve(2 * n)
	fill(b, n)
	if s := mustBuild(t, b); cap(s.table) != tableSize(n, 0) || s.claims != n {
		t.Errorf("over-reserved: table of %d slots (cap %d) for %d claims, want %d", len(s.table), cap(s.table), s.claims, tableSize(n, 0))
	}
	b = testBuilder("svc")
	b.reserve(maxReserve + 1) // a feed's claimed total beyond the bound reserves nothing
	if cap(b.slots) != 0 {
		t.Errorf("reserved %d slots past maxReserve", cap(b.slots))
	}
}

// A namespace over inlineNamespace bytes keeps its rest in the tail cell
// after its slot, so the arena holds the claim ids and nothing else, and
// folding reads the whole namespace back.
func TestLongNamespaceTailsLeaveTheArena(t *testing.T) {
	t.Parallel()
	b := testBuilder("svc")
	ids := 0
	k := make([]byte, ed25519.PublicKeySize)
	for i := range 1000 {
		binary.LittleEndian.PutUint32(k, uint32(i))
		id := fmt.Sprint("clm_", i)
		ns := strings.Repeat("n", inlineNamespace+1+i%(maxNamespaceLen-inlineNamespace))
		if err := b.add(Claim{ID: id, Namespace: ns, PublicKey: format(k), Service: "svc"}); err != nil {
			t.Fatal(err)
		}
		ids += len(id)
	}
	s := mustBuild(t, b)
	if len(s.arena) != ids {
		t.Errorf("arena of %d bytes, want the %d of the claim ids", len(s.arena), ids)
	}
	seen := 0
	s.each(func(ns string, pub *[ed25519.PublicKeySize]byte, a Approval) bool {
		i := int(binary.LittleEndian.Uint32(pub[:]))
		if want := strings.Repeat("n", inlineNamespace+1+i%(maxNamespaceLen-inlineNamespace)); ns != want || a.ClaimID != fmt.Sprint("clm_", i) {
			t.Fatalf("each: %q %q for tuple %d", ns, a.ClaimID, i)
		}
		seen++
		return true
	})
	if seen != 1000 {
		t.Errorf("each saw %d tuples, want 1000", seen)
	}
}

// A cache's HeldBytes counts a large snapshot's arrays while it is
// reachable, and stops counting them once the collector has freed them.
func TestHeldBytesFollowsSnapshots(t *testing.T) {
	var c Cache
	b := &builder{service: "svc", held: &c.held}
	k := make([]byte, ed25519.PublicKeySize)
	for i := range 20_000 {
		binary.LittleEndian.PutUint32(k, uint32(i))
		if err := b.add(Claim{ID: fmt.Sprint("clm_", i), Namespace: "ns", PublicKey: format(k), Service: "svc"}); err != nil {
			t.Fatal(err)
		}
	}
	s := mustBuild(t, b)
	table := int64(len(s.table)) * int64(unsafe.Sizeof(slot{}))
	if got := c.HeldBytes(); got < table {
		t.Fatalf("HeldBytes grew by %d with a table of %d bytes", got, table)
	}
	runtime.KeepAlive(s)
	for range 100 { // the cleanups run after the collections that free the arrays
		if c.HeldBytes() == 0 {
			return
		}
		runtime.GC()
		runtime.Gosched()
	}
	t.Fatalf("HeldBytes still %d after the snapshot was freed", c.HeldBytes())
}

// testBuilder is a builder counting its arrays in a counter of its own.
func testBuilder(service string) *builder {
	return &builder{service: service, held: new(heldmem.Counter)}
}
