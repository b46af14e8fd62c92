package main

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// doFunc sends request number i of a round and reports whether it failed.
// Signed targets hold exactly limit pre-signed requests, so i < limit.
type doFunc func(ctx context.Context, i int) error

// requestGrace bounds how long a request may still run after its round's
// duration; a round never lasts longer than its duration plus this.
const requestGrace = 10 * time.Second

// maxWorkers bounds -workers, and so the connections per target.
const maxWorkers = 4096

// sample is what one or more rounds of one target measured.
type sample struct {
	lats      []time.Duration // of successful requests
	errors    int
	firstErr  error
	elapsed   time.Duration
	lag       []time.Duration // open loop: how late each request was scheduled
	exhausted bool            // closed loop: ran out of pre-signed requests
	cpu       time.Duration   // the CPU time both processes used meanwhile
}

func (s *sample) add(lat time.Duration, err error) {
	if err != nil {
		s.errors++
		if s.firstErr == nil {
			s.firstErr = err
		}
		return
	}
	s.lats = append(s.lats, lat)
}

// merge adds another round's measurements to s.
func (s *sample) merge(o sample) {
	s.lats = append(s.lats, o.lats...)
	s.errors += o.errors
	if s.firstErr == nil {
		s.firstErr = o.firstErr
	}
	s.elapsed += o.elapsed
	s.lag = append(s.lag, o.lag...)
	s.exhausted = s.exhausted || o.exhausted
	s.cpu += o.cpu
}

// rps is the successful requests per second.
func (s *sample) rps() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(len(s.lats)) / s.elapsed.Seconds()
}

// result summarizes s with exact (nearest-rank) percentiles.
func (s *sample) result(cpus int) Result {
	slices.Sort(s.lats)
	slices.Sort(s.lag)
	r := Result{
		Requests: len(s.lats) + s.errors, Errors: s.errors, Seconds: round3(s.elapsed.Seconds()),
		RPS: math.Round(s.rps()), PoolExhausted: s.exhausted,
		P50: ms(percentile(s.lats, 0.50)), P90: ms(percentile(s.lats, 0.90)), P99: ms(percentile(s.lats, 0.99)),
		LagP99: ms(percentile(s.lag, 0.99)),
	}
	if len(s.lats) > 0 {
		r.Max = ms(s.lats[len(s.lats)-1])
	}
	if s.firstErr != nil {
		r.FirstError = s.firstErr.Error()
	}
	if s.elapsed > 0 && s.cpu > 0 {
		r.CPU = math.Round(s.cpu.Seconds() / s.elapsed.Seconds() / float64(cpus) * 100)
		r.PerCPU = math.Round(float64(len(s.lats)) / s.cpu.Seconds())
	}
	return r
}

// closedLoop runs workers that each send a request as soon as their
// previous one is answered, for d or until limit requests (when limit > 0)
// have been sent. Latency is the time from send to the end of the body.
func closedLoop(ctx context.Context, do doFunc, workers, limit int, d time.Duration, cpuTime func() time.Duration) sample {
	rctx, cancel := context.WithTimeout(ctx, d+requestGrace)
	defer cancel()
	per := make([]sample, workers)
	var (
		next      atomic.Int64
		exhausted atomic.Bool
		wg        sync.WaitGroup
	)
	cpu := cpuTime()
	start := time.Now()
	deadline := start.Add(d)
	for w := range per {
		wg.Go(func() {
			s := &per[w]
			for ctx.Err() == nil {
				sent := time.Now()
				if !sent.Before(deadline) {
					return
				}
				i := int(next.Add(1) - 1)
				if limit > 0 && i >= limit {
					exhausted.Store(true)
					return
				}
				err := do(rctx, i)
				s.add(time.Since(sent), err)
			}
		})
	}
	wg.Wait()
	all := sample{elapsed: time.Since(start), cpu: cpuTime() - cpu, exhausted: exhausted.Load()}
	for _, s := range per {
		all.lats = append(all.lats, s.lats...)
		all.errors += s.errors
		if all.firstErr == nil {
			all.firstErr = s.firstErr
		}
	}
	return all
}

// openLoop schedules rate requests per second for d, whatever the answers,
// and workers send them in schedule order, like wrk2: a fixed number of
// connections, with every request timed from its scheduled send time, so a
// server that stalls is charged for the requests queued behind it (no
// coordinated omission). The sample's lag says how late the scheduler
// itself was.
func openLoop(ctx context.Context, do doFunc, workers int, rate float64, d time.Duration, cpuTime func() time.Duration) sample {
	n := scheduled(rate, d)
	interval := time.Duration(float64(time.Second) / rate)
	rctx, cancel := context.WithTimeout(ctx, d+requestGrace)
	defer cancel()
	lats := make([]time.Duration, n)
	errs := make([]error, n)
	lag := make([]time.Duration, 0, n)
	queue := make(chan int, n)
	cpu := cpuTime()
	start := time.Now()
	due := func(i int) time.Time { return start.Add(time.Duration(i) * interval) }
	go func() {
		// The scheduler has a thread of its own; it exits with the goroutine.
		preciseTimer()
		defer close(queue)
		for i := range n {
			if !sleepUntil(rctx, due(i)) {
				return
			}
			lag = append(lag, time.Since(due(i)))
			queue <- i
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range queue {
				errs[i] = do(rctx, i)
				lats[i] = time.Since(due(i))
			}
		})
	}
	wg.Wait() // the queue is closed and drained: the scheduler is done
	s := sample{elapsed: time.Since(start), cpu: cpuTime() - cpu, lag: lag}
	for i := range lag {
		s.add(lats[i], errs[i])
	}
	if unsent := n - len(lag); unsent > 0 {
		s.errors += unsent
		if s.firstErr == nil {
			s.firstErr = errStopped
		}
	}
	return s
}

// scheduled is how many requests openLoop sends at rate for d.
func scheduled(rate float64, d time.Duration) int { return max(1, int(rate*d.Seconds())) }

// errStopped counts the requests an interrupted open loop never scheduled.
var errStopped = errors.New("the round stopped before every request was scheduled")

// sleepUntil sleeps until due, in slices short enough to notice ctx's end
// promptly; it reports false when ctx ended first.
func sleepUntil(ctx context.Context, due time.Time) bool {
	for {
		if ctx.Err() != nil {
			return false
		}
		wait := time.Until(due)
		if wait <= 0 {
			return true
		}
		sleep(min(wait, 50*time.Millisecond))
	}
}

// percentile is the nearest-rank percentile of sorted samples (0 when
// there are none).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// ms converts to milliseconds rounded to the microsecond.
func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
