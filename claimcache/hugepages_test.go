package claimcache

import "testing"

// A table large enough to be advised stays fully usable.
func TestAdviseHugePagesLargeTable(t *testing.T) {
	b := &builder{service: "svc"}
	for i := range 200_000 {
		k := make([]byte, 32)
		k[0], k[1], k[2] = byte(i), byte(i>>8), byte(i>>16)
		b.slots = append(b.slots, slot{key: makeTupleKey("ns", k), approvedAt: int64(i)})
	}
	s := b.build("v1")
	if n := uintptr(len(s.table)) * 32; n < 4<<20 {
		t.Fatalf("table of %d bytes does not reach the advised path", n)
	}
	for i := range 200_000 {
		k := make([]byte, 32)
		k[0], k[1], k[2] = byte(i), byte(i>>8), byte(i>>16)
		if a, ok := s.lookup("ns", k); !ok || a.ApprovedAt.UnixMilli() != int64(i) {
			t.Fatalf("tuple %d lost after advising huge pages", i)
		}
	}
}
