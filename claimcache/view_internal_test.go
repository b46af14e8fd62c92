package claimcache

import (
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/internal/heldmem"
)

// TestViewAppliesAndFolds applies batches of changes to a view, past the
// point where they are folded into a new snapshot, and checks every lookup
// and the count against a plain map after each batch.
func TestViewAppliesAndFolds(t *testing.T) {
	t.Parallel()
	key := func(i int) ed25519.PublicKey {
		k := make([]byte, 32)
		binary.LittleEndian.PutUint64(k, uint64(i)+1)
		return k
	}
	// Long namespaces too, so folding carries tails.
	ns := func(i int) string { return fmt.Sprintf("ns-%d-%s", i%7, strings.Repeat("x", i%3*10)) }
	want := map[int]string{} // agent → claim id
	b := testBuilder("svc")
	for i := range 1000 {
		id := fmt.Sprintf("clm_%d_0", i)
		if err := b.add(Claim{ID: id, Namespace: ns(i), PublicKey: format(key(i)), Service: "svc", ApprovedAt: time.UnixMilli(int64(i))}); err != nil {
			t.Fatal(err)
		}
		want[i] = id
	}
	v := newView(mustBuild(t, b))
	const agents = 6000
	folded := false
	for batch := range 12 {
		e := v.edit("svc", new(heldmem.Counter))
		for j := range 700 {
			i := (batch*700 + j) % agents
			ch := Change{Claim: Claim{ID: fmt.Sprintf("clm_%d_%d", i, batch+1), Namespace: ns(i), PublicKey: format(key(i)), Service: "svc", ApprovedAt: time.UnixMilli(int64(j))}}
			if held, ok := want[i]; ok && j%2 == 0 {
				ch.Delete, ch.ID = true, held
				delete(want, i)
			} else {
				want[i] = ch.ID
			}
			if err := e.apply(ch); err != nil {
				t.Fatal(err)
			}
		}
		// A delete of a claim the tuple no longer holds changes nothing,
		// nor does a change of another service.
		e.apply(Change{Delete: true, Claim: Claim{ID: "clm_stale", Namespace: ns(0), PublicKey: format(key(0)), Service: "svc"}})
		e.apply(Change{Claim: Claim{ID: "clm_foreign", Namespace: "other", PublicKey: format(key(5000)), Service: "other"}})
		next, err := e.done(fmt.Sprint(batch))
		if err != nil {
			t.Fatal(err)
		}
		folded = folded || next.base != v.base
		v = next
		if v.claims != len(want) || v.version != fmt.Sprint(batch) {
			t.Fatalf("batch %d: %d claims at %q, want %d", batch, v.claims, v.version, len(want))
		}
		for i := range agents {
			got, _, ok := v.find(ns(i), (*[ed25519.PublicKeySize]byte)(key(i)))
			if id := want[i]; ok != (id != "") || got != id {
				t.Fatalf("batch %d, agent %d: %q %v, want %q", batch, i, got, ok, id)
			}
		}
	}
	if !folded || len(v.over) > foldThreshold(v.base) {
		t.Fatalf("folded %v, %d changes over the snapshot", folded, len(v.over))
	}
}

// A lookup through a view's changes allocates nothing, like one of the
// snapshot.
func TestViewLookupAllocatesNothing(t *testing.T) {
	b := testBuilder("svc")
	pub := make(ed25519.PublicKey, 32)
	b.add(Claim{ID: "clm_a", Namespace: "alice", PublicKey: format(pub), Service: "svc"})
	e := newView(mustBuild(t, b)).edit("svc", new(heldmem.Counter))
	pub2 := make(ed25519.PublicKey, 32)
	pub2[0] = 1
	e.apply(Change{Claim: Claim{ID: "clm_b", Namespace: "bob", PublicKey: format(pub2), Service: "svc"}})
	v, _ := e.done("2")
	if n := testing.AllocsPerRun(100, func() {
		v.find("bob", (*[ed25519.PublicKeySize]byte)(pub2))
		v.find("alice", (*[ed25519.PublicKeySize]byte)(pub))
	}); n != 0 {
		t.Fatalf("%v allocations per lookup", n)
	}
}
