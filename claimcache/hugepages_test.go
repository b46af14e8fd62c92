package claimcache

import (
	"crypto/ed25519"
	"fmt"
	"testing"
	"time"
	"unsafe"
)

// A table large enough to be advised stays fully usable.
func TestAdviseHugePagesLargeTable(t *testing.T) {
	t.Parallel()
	b := testBuilder("svc")
	key := func(i int) []byte {
		k := make([]byte, 32)
		k[0], k[1], k[2] = byte(i), byte(i>>8), byte(i>>16)
		return k
	}
	for i := range 100_000 {
		c := Claim{ID: fmt.Sprint("clm_", i), Namespace: "ns", PublicKey: format(key(i)), Service: "svc", ApprovedAt: time.UnixMilli(int64(i))}
		if err := b.add(c); err != nil {
			t.Fatal(err)
		}
	}
	s := mustBuild(t, b)
	if n := uintptr(len(s.table)) * unsafe.Sizeof(slot{}); n < 4<<20 {
		t.Fatalf("table of %d bytes does not reach the advised path", n)
	}
	for i := range 100_000 {
		if id, at, ok := s.find("ns", (*[ed25519.PublicKeySize]byte)(key(i))); !ok || at != int64(i) || id != fmt.Sprint("clm_", i) {
			t.Fatalf("tuple %d lost after advising huge pages: %q at %d, %v", i, id, at, ok)
		}
	}
}
