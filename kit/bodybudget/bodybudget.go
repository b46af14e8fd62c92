// Package bodybudget is the allowance of request body bytes a server holds
// at once. Each reader takes what it is about to buffer before reading and
// gives it back when its request ends, so the sum over concurrent requests
// never passes Max, whatever the clients declare.
package bodybudget

import "sync/atomic"

// Budget is shared by every request of one server. Set Max before use.
type Budget struct {
	Max  int64
	used atomic.Int64
}

// Take reserves n bytes; false means the budget would pass Max and nothing
// was reserved.
func (b *Budget) Take(n int64) bool {
	if b.used.Add(n) > b.Max {
		b.used.Add(-n)
		return false
	}
	return true
}

// Give returns n bytes taken earlier.
func (b *Budget) Give(n int64) { b.used.Add(-n) }

// Used reports the bytes reserved now.
func (b *Budget) Used() int64 { return b.used.Load() }
