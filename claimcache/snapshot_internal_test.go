package claimcache

import (
	"crypto/ed25519"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// The snapshot matches tuples exactly: a lookup that differs from an approved
// tuple in any byte of the namespace or key misses, whether the namespace
// sits in its slot or in the arena, and however many tuples share a key.
func TestSnapshotMatchesExactly(t *testing.T) {
	key := func(b byte) ed25519.PublicKey { k := make([]byte, 32); k[0], k[31] = b, b; return k }
	short, long := "alice", "the-research-agents-of-acme-corporation" // inline, arena
	b := &builder{service: "svc"}
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
	s := b.build("v1")
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
		{"", key(1), ""},
	} {
		a, ok := s.lookup(tt.namespace, tt.key)
		if ok != (tt.want != "") || a.ClaimID != tt.want {
			t.Errorf("lookup(%q, %x…) = %q, %v; want %q", tt.namespace, tt.key[:2], a.ClaimID, ok, tt.want)
		}
	}
	// Variants of the same length and key: with 8-bit tags, thousands of
	// them make sure the exact comparison itself is exercised.
	for i := range 26 * 26 * 26 {
		for _, ns := range []string{short, long} {
			k := key(map[string]byte{short: 1, long: 2}[ns])
			for _, at := range [][3]int{{0, 1, len(ns) - 1}, {len(ns) - 3, len(ns) - 2, len(ns) - 1}} {
				v := []byte(ns)
				v[at[0]], v[at[1]], v[at[2]] = byte('a'+i%26), byte('a'+i/26%26), byte('a'+i/676)
				if a, ok := s.lookup(string(v), k); ok && string(v) != ns {
					t.Fatalf("lookup(%q) matched %q", v, a.ClaimID)
				}
			}
			k[1+i%30], k[2+i/30%29] = byte(i), byte(i>>8|1)
			if a, ok := s.lookup(ns, k); ok {
				t.Fatalf("lookup(%q, %x) matched %q", ns, k, a.ClaimID)
			}
		}
	}
	if _, ok := s.lookup(short, key(1)[:31]); ok {
		t.Error("a 31-byte key matched")
	}
	if _, ok := (&builder{service: "svc"}).build("v0").lookup(short, key(1)); ok {
		t.Error("an empty snapshot matched")
	}
}

func format(k ed25519.PublicKey) string { return "ed25519:" + base64.StdEncoding.EncodeToString(k) }
