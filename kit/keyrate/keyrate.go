// Package keyrate keeps a token bucket per key (a client network, a
// connection and namespace) in memory, for limits that must refuse a
// flood before it costs any further work.
//
// The buckets form a bounded LRU: at the bound, the least recently used
// bucket is forgotten first, so spraying keys cannot grow memory. A
// forgotten key starts again with a full bucket, which its own traffic
// would have refilled anyway unless it is among the most active.
package keyrate

import (
	"container/list"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Buckets is a token bucket per key, each refilling perMinute tokens a
// minute with a burst of perMinute. It is safe for concurrent use.
type Buckets struct {
	every rate.Limit
	burst int
	max   int

	mu    sync.Mutex
	order *list.List // front: most recently used; values are *bucket
	byKey map[string]*list.Element
}

type bucket struct {
	key string
	lim *rate.Limiter
}

// New returns buckets of perMinute tokens a minute (at least 1) that
// remember at most keys keys (at least 1).
func New(perMinute, keys int) *Buckets {
	perMinute = max(perMinute, 1)
	return &Buckets{
		every: rate.Limit(float64(perMinute) / 60),
		burst: perMinute,
		max:   max(keys, 1),
		order: list.New(),
		byKey: make(map[string]*list.Element),
	}
}

// Take takes a token of key's bucket at now and returns 0; when none is
// left it takes nothing and returns how long until one is.
func (b *Buckets) Take(key string, now time.Time) time.Duration {
	b.mu.Lock()
	el, ok := b.byKey[key]
	if ok {
		b.order.MoveToFront(el)
	} else {
		if b.order.Len() >= b.max {
			oldest := b.order.Back()
			delete(b.byKey, oldest.Value.(*bucket).key)
			b.order.Remove(oldest)
		}
		el = b.order.PushFront(&bucket{key: key, lim: rate.NewLimiter(b.every, b.burst)})
		b.byKey[key] = el
	}
	lim := el.Value.(*bucket).lim
	b.mu.Unlock()
	res := lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d
	}
	return 0
}
