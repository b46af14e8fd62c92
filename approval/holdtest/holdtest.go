// Package holdtest is the contract every approval.Store passes. Holds
// read back as written; Add keeps a live hold and replaces an ended or
// spent one; Spend never lets more calls through than the uses it is
// given, however many handles spend at once. MemoryStore, package
// sqlitestore and package pgstore run it; a store of your own can too.
//
//	func TestHoldContract(t *testing.T) {
//		holdtest.Run(t, func(t *testing.T) func(*testing.T) approval.Store {
//			path := filepath.Join(t.TempDir(), "v.db")
//			return func(t *testing.T) approval.Store { return open(t, path).Holds() }
//		})
//	}
package holdtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/approval"
)

// NewStore makes fresh, empty storage for one test and returns how to open
// a handle on it. Each handle stands for one replica (or one run of a
// restarted gateway); the function closes what it opens when the test
// ends.
type NewStore func(t *testing.T) (open func(t *testing.T) approval.Store)

// Run runs the contract as subtests of t.
func Run(t *testing.T, newStore NewStore) {
	t.Run("HoldsReadBackAsWritten", func(t *testing.T) { readBack(t, newStore(t)) })
	t.Run("AddKeepsTheLiveHold", func(t *testing.T) { addKeepsLive(t, newStore(t)) })
	t.Run("SpendCountsToTheGivenUses", func(t *testing.T) { spendCounts(t, newStore(t)) })
	t.Run("ConcurrentSpendsTakeEachUseOnce", func(t *testing.T) { concurrentSpends(t, newStore(t)) })
}

// Now is the contract's clock.
var Now = time.Unix(1_800_000_000, 0)

// NewHold is a pending hold of binding, its id committed to it, expiring
// ten minutes after Now.
func NewHold(binding string) *approval.Hold {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	return &approval.Hold{Binding: binding, ID: approval.ActionID(salt, binding), Salt: salt,
		Digest: "5d41402abc4b2a76b9719d911017c592ae4bcf1b4bdf5ec9d9b0e3a1f6c0e2d7", ExpiresAt: Now.Add(10 * time.Minute)}
}

// Approved is an approval of uses calls, usable for an hour past Now; its
// assertion is bytes, not a signature, since a Store checks none.
func Approved(uses int) *approval.Approval {
	return &approval.Approval{Uses: uses, Until: Now.Add(time.Hour + 123456789), Assertion: &approval.Assertion{
		CredentialID: []byte("credential"), AuthenticatorData: []byte{1, 2, 3, 0, 255}, ClientDataJSON: []byte(`{"type":"webauthn.get"}`),
		Signature: []byte{0x30, 0x45, 0}}}
}

func binding(i int) string { return fmt.Sprintf("%064x", i) }

func equal(t *testing.T, what string, got, want *approval.Hold) {
	t.Helper()
	if got == nil || want == nil {
		if got != want {
			t.Fatalf("%s: got %+v, want %+v", what, got, want)
		}
		return
	}
	g, w := *got, *want
	if !g.ExpiresAt.Equal(w.ExpiresAt) {
		t.Fatalf("%s: expires at %v, want %v", what, g.ExpiresAt, w.ExpiresAt)
	}
	g.ExpiresAt, w.ExpiresAt = time.Time{}, time.Time{}
	if (g.Approval == nil) != (w.Approval == nil) {
		t.Fatalf("%s: approval %+v, want %+v", what, g.Approval, w.Approval)
	}
	if g.Approval != nil {
		ga, wa := *g.Approval, *w.Approval
		if !ga.Until.Equal(wa.Until) {
			t.Fatalf("%s: until %v, want %v", what, ga.Until, wa.Until)
		}
		ga.Until, wa.Until = time.Time{}, time.Time{}
		g.Approval, w.Approval = &ga, &wa
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: got %+v (approval %+v), want %+v (approval %+v)", what, g, g.Approval, w, w.Approval)
	}
}

// held and spent stop the test at a Store's error.
func held(t *testing.T) func(*approval.Hold, error) *approval.Hold {
	return func(h *approval.Hold, err error) *approval.Hold {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
}

func spent(t *testing.T) func(bool, error) bool {
	return func(ok bool, err error) bool {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
}

func readBack(t *testing.T, open func(*testing.T) approval.Store) {
	ctx := context.Background()
	a, b := open(t), open(t)
	if h := held(t)(a.Hold(ctx, binding(1))); h != nil {
		t.Fatalf("an empty store holds %+v", h)
	}
	h := NewHold(binding(1))
	equal(t, "Add", held(t)(a.Add(ctx, h, Now)), h)
	equal(t, "another handle's Hold", held(t)(b.Hold(ctx, h.Binding)), h)

	ap := Approved(3)
	if !spent(t)(b.Spend(ctx, h.Binding, h.ID, ap)) {
		t.Fatal("Spend of a pending hold took no use")
	}
	want := h.Clone()
	want.Approval, want.Spent = ap, 1
	equal(t, "the hold after a use", held(t)(a.Hold(ctx, h.Binding)), want)

	// A window of zero reads back as zero: the request's expiry.
	h2 := NewHold(binding(2))
	held(t)(a.Add(ctx, h2, Now))
	ap2 := &approval.Approval{Uses: 1, Assertion: ap.Assertion}
	spent(t)(a.Spend(ctx, h2.Binding, h2.ID, ap2))
	want = h2.Clone()
	want.Approval, want.Spent = ap2, 1
	equal(t, "an approval without a window", held(t)(b.Hold(ctx, h2.Binding)), want)
}

func addKeepsLive(t *testing.T, open func(*testing.T) approval.Store) {
	ctx := context.Background()
	a, b := open(t), open(t)
	first := NewHold(binding(1))
	held(t)(a.Add(ctx, first, Now))
	equal(t, "Add over a pending hold", held(t)(b.Add(ctx, NewHold(binding(1)), Now.Add(time.Minute))), first)

	// Once ended, a pending hold gives way.
	second := NewHold(binding(1))
	equal(t, "Add over an ended hold", held(t)(b.Add(ctx, second, first.ExpiresAt)), second)

	// An approved hold lasts through its window, then gives way.
	spent(t)(a.Spend(ctx, second.Binding, second.ID, Approved(2)))
	inWindow := second.ExpiresAt.Add(time.Minute)
	got := held(t)(a.Add(ctx, NewHold(binding(1)), inWindow))
	if got.ID != second.ID {
		t.Fatalf("Add within the approval's window replaced it with %s", got.ID)
	}
	third := NewHold(binding(1))
	equal(t, "Add past the window", held(t)(a.Add(ctx, third, Approved(2).Until)), third)

	// A spent approval gives way at once.
	spent(t)(b.Spend(ctx, third.Binding, third.ID, Approved(1)))
	fourth := NewHold(binding(1))
	equal(t, "Add over a spent hold", held(t)(a.Add(ctx, fourth, Now)), fourth)

	// Other calls' holds are apart.
	other := NewHold(binding(2))
	equal(t, "Add of another call", held(t)(a.Add(ctx, other, Now)), other)
	equal(t, "the first call's hold", held(t)(b.Hold(ctx, fourth.Binding)), fourth)
}

func spendCounts(t *testing.T, open func(*testing.T) approval.Store) {
	ctx := context.Background()
	a, b := open(t), open(t)
	h := NewHold(binding(1))
	held(t)(a.Add(ctx, h, Now))
	other := NewHold(binding(1)).ID
	if spent(t)(a.Spend(ctx, h.Binding, other, Approved(1))) {
		t.Fatal("Spend of another request's id took a use")
	}
	if spent(t)(a.Spend(ctx, binding(9), h.ID, Approved(1))) {
		t.Fatal("Spend of a binding without a hold took a use")
	}
	for i := range 3 {
		s := []approval.Store{a, b}[i%2]
		if !spent(t)(s.Spend(ctx, h.Binding, h.ID, Approved(3))) {
			t.Fatalf("use %d of 3 was refused", i+1)
		}
	}
	if spent(t)(b.Spend(ctx, h.Binding, h.ID, Approved(3))) {
		t.Fatal("a fourth use of three was taken")
	}

	// The uses Spend is given cap the count, whatever was recorded before:
	// a Gate passes the uses it verified.
	h2 := NewHold(binding(2))
	held(t)(a.Add(ctx, h2, Now))
	spent(t)(a.Spend(ctx, h2.Binding, h2.ID, Approved(5)))
	if spent(t)(b.Spend(ctx, h2.Binding, h2.ID, Approved(1))) {
		t.Fatal("a second use was taken of an approval verified for one")
	}
	if got := held(t)(b.Hold(ctx, h2.Binding)); got.Spent != 1 {
		t.Fatalf("spent %d, want 1", got.Spent)
	}
}

func concurrentSpends(t *testing.T, open func(*testing.T) approval.Store) {
	ctx := context.Background()
	handles := []approval.Store{open(t), open(t)}
	for _, uses := range []int{1, 5} {
		h := NewHold(binding(uses))
		held(t)(handles[0].Add(ctx, h, Now))
		var taken atomic.Int64
		var wg sync.WaitGroup
		for i := range 32 {
			wg.Go(func() {
				ok, err := handles[i%2].Spend(ctx, h.Binding, h.ID, Approved(uses))
				if err != nil {
					t.Error(err)
				}
				if ok {
					taken.Add(1)
				}
			})
		}
		wg.Wait()
		if taken.Load() != int64(uses) {
			t.Fatalf("32 concurrent spends on two handles took %d uses of %d", taken.Load(), uses)
		}
	}
}
