package keyrate_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/idnhq/idn/kit/keyrate"
)

func TestKeysRefusedOnceTheirBurstIsSpent(t *testing.T) {
	t.Parallel()
	b := keyrate.New(2, 10)
	now := time.Now()
	for i := range 2 {
		if d := b.Take("a", now); d != 0 {
			t.Fatalf("take %d refused for %v", i, d)
		}
	}
	if d := b.Take("a", now); d <= 0 || d > 30*time.Second {
		t.Fatalf("third take within the burst window: wait %v, want (0, 30s]", d)
	}
	if d := b.Take("b", now); d != 0 {
		t.Fatalf("another key refused for %v", d)
	}
	if d := b.Take("a", now.Add(30*time.Second)); d != 0 {
		t.Fatalf("a refilled token refused for %v", d)
	}
}

func TestSprayingKeysStaysBounded(t *testing.T) {
	t.Parallel()
	b := keyrate.New(1, 100)
	now := time.Now()
	for i := range 10_000 {
		if d := b.Take(fmt.Sprintf("github\x00rand-%d", i), now); d != 0 {
			t.Fatalf("fresh key %d refused", i)
		}
	}
	// The oldest keys were forgotten: they start again with a full
	// bucket. The most recent ones are still limited.
	if d := b.Take("github\x00rand-0", now); d != 0 {
		t.Fatalf("a forgotten key was remembered: wait %v", d)
	}
	if b.Take("github\x00rand-9999", now) == 0 {
		t.Fatal("recent key allowed twice within a minute")
	}
}
