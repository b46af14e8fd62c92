package labelcap

import (
	"fmt"
	"sync"
	"testing"
)

func TestSet(t *testing.T) {
	s := New(2)
	for _, c := range []struct{ in, want string }{
		{"a", "a"}, {"b", "b"}, {"a", "a"}, {"c", Other}, {"b", "b"}, {"d", Other},
	} {
		if got := s.Value(c.in); got != c.want {
			t.Errorf("Value(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	var zero Set
	if got := zero.Value("a"); got != Other {
		t.Errorf("zero Set admits %q", got)
	}
}

// TestSetFlood: however many goroutines offer distinct values at once, no
// more than the cap is admitted.
func TestSetFlood(t *testing.T) {
	s := New(10)
	var admitted sync.Map
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				if v := s.Value(fmt.Sprint(g, "-", i)); v != Other {
					admitted.Store(v, true)
				}
			}
		})
	}
	wg.Wait()
	n := 0
	admitted.Range(func(any, any) bool { n++; return true })
	if n != 10 {
		t.Errorf("%d values admitted, want 10", n)
	}
}
