package main

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// doFunc sends request number i of a phase and reports whether it failed.
// Signed targets hold exactly limit pre-signed requests, so i < limit.
type doFunc func(ctx context.Context, i int) error

// requestGrace bounds how long a request may still run after its phase's
// duration; a phase never lasts longer than its duration plus this.
const requestGrace = 5 * time.Second

// maxInFlight caps the open loop's outstanding requests. A request that
// waits for a slot is still timed from its scheduled send time.
const maxInFlight = 4096

// tally collects one worker's outcomes without sharing memory.
type tally struct {
	lats     []time.Duration
	errors   int
	firstErr error
}

func (t *tally) add(lat time.Duration, err error) {
	if err != nil {
		t.errors++
		if t.firstErr == nil {
			t.firstErr = err
		}
		return
	}
	t.lats = append(t.lats, lat)
}

// closedLoop runs workers that each send a request as soon as their
// previous one is answered, for d or until limit requests (when limit > 0)
// have been sent. Latency is the time from send to the end of the body.
func closedLoop(ctx context.Context, do doFunc, workers, limit int, d time.Duration) Result {
	rctx, cancel := context.WithTimeout(ctx, d+requestGrace)
	defer cancel()
	tallies := make([]tally, workers)
	var (
		next      atomic.Int64
		exhausted atomic.Bool
		wg        sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := range tallies {
		wg.Go(func() {
			t := &tallies[w]
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
				t.add(time.Since(sent), err)
			}
		})
	}
	wg.Wait()
	r := summarize(tallies, time.Since(start))
	r.Mode, r.Workers, r.PoolExhausted = ModeMax, workers, exhausted.Load()
	return r
}

// openLoop sends rate requests per second for d whatever the answers, each
// at its scheduled time, and times every request from that scheduled time,
// so a stalled server is charged for the requests that queue behind it (no
// coordinated omission). Lag records how late the sender itself was.
func openLoop(ctx context.Context, do doFunc, rate float64, d time.Duration) Result {
	n := max(1, int(rate*d.Seconds()))
	interval := time.Duration(float64(time.Second) / rate)
	rctx, cancel := context.WithTimeout(ctx, d+requestGrace)
	defer cancel()
	lats := make([]time.Duration, n)
	errs := make([]error, n)
	lag := make([]time.Duration, 0, n)
	slots := make(chan struct{}, maxInFlight)
	timer := time.NewTimer(0)
	<-timer.C
	var wg sync.WaitGroup
	start := time.Now()
	sent := 0
schedule:
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-rctx.Done():
				break schedule
			}
		}
		select {
		case slots <- struct{}{}:
		case <-rctx.Done():
			break schedule
		}
		lag = append(lag, time.Since(due))
		sent++
		wg.Go(func() {
			defer func() { <-slots }()
			errs[i] = do(rctx, i)
			lats[i] = time.Since(due)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	t := tally{lats: make([]time.Duration, 0, sent)}
	for i := range sent {
		t.add(lats[i], errs[i])
	}
	r := summarize([]tally{t}, elapsed)
	r.Mode, r.Rate = ModeRate, rate
	slices.Sort(lag)
	r.LagP99 = ms(percentile(lag, 0.99))
	if sent < n {
		r.Errors += n - sent
		if r.FirstError == "" {
			r.FirstError = "phase stopped before every request was sent"
		}
	}
	return r
}

// summarize merges the tallies into a Result with exact percentiles.
func summarize(ts []tally, elapsed time.Duration) Result {
	var all []time.Duration
	var r Result
	for _, t := range ts {
		all = append(all, t.lats...)
		r.Errors += t.errors
		if t.firstErr != nil && r.FirstError == "" {
			r.FirstError = t.firstErr.Error()
		}
	}
	slices.Sort(all)
	r.Requests = len(all) + r.Errors
	r.Seconds = elapsed.Seconds()
	if r.Seconds > 0 {
		r.RPS = float64(len(all)) / r.Seconds
	}
	r.P50, r.P90, r.P99 = ms(percentile(all, 0.50)), ms(percentile(all, 0.90)), ms(percentile(all, 0.99))
	if len(all) > 0 {
		r.Max = ms(all[len(all)-1])
	}
	return r
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
