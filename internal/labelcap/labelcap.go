// Package labelcap bounds the values of a metric label: the first Max
// distinct values are kept, and every later one counts under Other, so a
// label whose values come from configuration or from upstreams can never
// grow a metric without bound.
package labelcap

import (
	"sync"
	"sync/atomic"
)

// Other is the value that stands for every value past the cap.
const Other = "other"

// Set remembers the values admitted so far. Its zero value admits none
// (every value is Other); create it with New.
type Set struct {
	max  int64
	n    atomic.Int64
	seen sync.Map // string → struct{}
	mu   sync.Mutex
}

// New returns a Set that admits max distinct values.
func New(max int) *Set { return &Set{max: int64(max)} }

// Value is v when v has been admitted or can still be, else Other. A
// value admitted once stays admitted. Safe for concurrent use; a value
// seen before costs one map read.
func (s *Set) Value(v string) string {
	if _, ok := s.seen.Load(v); ok {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen.Load(v); ok {
		return v
	}
	if s.n.Load() >= s.max {
		return Other
	}
	s.seen.Store(v, struct{}{})
	s.n.Add(1)
	return v
}
