package signed

import (
	"container/list"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxLimitedAddresses bounds the client networks whose signed-request
// buckets are remembered.
const maxLimitedAddresses = 65_536

// addressLimits is a token bucket per client network, refilling perMinute
// tokens a minute with a burst of perMinute, in memory: it refuses a flood
// before the request costs a database round trip. The buckets form a
// bounded LRU; the least recently used is forgotten first, so spraying
// addresses cannot grow memory (a forgotten address starts again with a
// full bucket, which its own traffic would have refilled anyway unless it
// is among the most active).
type addressLimits struct {
	every rate.Limit
	burst int
	max   int

	mu    sync.Mutex
	order *list.List // front: most recently used; values are *addressBucket
	byKey map[string]*list.Element
}

type addressBucket struct {
	key string
	lim *rate.Limiter
}

func newAddressLimits(perMinute, max int) *addressLimits {
	return &addressLimits{
		every: rate.Limit(float64(perMinute) / 60),
		burst: perMinute,
		max:   max,
		order: list.New(),
		byKey: make(map[string]*list.Element),
	}
}

// wait takes a token of key's bucket at now; when none is left it takes
// nothing and returns how long until one is (0: go ahead).
func (l *addressLimits) wait(key string, now time.Time) time.Duration {
	l.mu.Lock()
	el, ok := l.byKey[key]
	if ok {
		l.order.MoveToFront(el)
	} else {
		if l.order.Len() >= l.max {
			oldest := l.order.Back()
			delete(l.byKey, oldest.Value.(*addressBucket).key)
			l.order.Remove(oldest)
		}
		el = l.order.PushFront(&addressBucket{key: key, lim: rate.NewLimiter(l.every, l.burst)})
		l.byKey[key] = el
	}
	lim := el.Value.(*addressBucket).lim
	l.mu.Unlock()
	res := lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d
	}
	return 0
}
