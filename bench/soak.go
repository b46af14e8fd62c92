package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
)

// soakWarmup is when a soak's memory should stop growing: the gateway
// keeps each nonce for the signature window (330 s by default) plus up
// to a second, so from then on as many expire as arrive.
const soakWarmup = 6 * time.Minute

// soakRow is one interval of a soak.
type soakRow struct {
	at               time.Duration // since the start, at the end of the interval
	ok, full, failed int64         // in the interval
	rps              float64       // successful requests per second in the interval
	cpu              float64       // the gateway process's CPU use, % of one CPU
	rss, heap        int64         // the gateway process's, at the end
	ready            int           // status of /health/ready at the end
}

// soakCounts are a soak's running totals.
type soakCounts struct {
	ok, full, failed atomic.Int64
	firstErr         sync.Once
	first            string
}

func (c *soakCounts) fail(err error) {
	c.failed.Add(1)
	c.firstErr.Do(func() { c.first = err.Error() })
}

// soak loads the gateway route at its maximum rate for b.o.soak with
// -workers workers (a closed loop), each request signed with its own nonce
// as it is sent: a soak sends millions, too many to sign beforehand. Every
// b.o.soakEvery it prints a row: the rate, the requests answered 503
// NONCE_STORE_FULL and those that failed otherwise, the gateway process's
// CPU, resident set and live heap, and its readiness. It returns an error
// when any request failed.
func (b *bench) soak(stdout io.Writer) error {
	st := b.st
	url := st.gateway + "/proxy/" + httpConnection + "/v1/items/42"
	client := b.newClient()
	if err := soakSend(b.ctx, client, st.agent, url, &soakCounts{}); err != nil {
		return fmt.Errorf("gateway check: %w", err)
	}
	fmt.Fprintf(stdout, "idn bench soak: GET /proxy/%s/… through the gateway for %s at its maximum rate (closed loop, %d workers),\n"+
		"each request signed with its own nonce as it is sent (so the client's signing shares the client's CPUs).\n"+
		"Gateway figures are its process's (CPU as %% of one CPU). Warm-up: the first %s "+
		"(6 min, when the 330 s nonce window has turned over, or three quarters of a shorter soak).\n\n",
		httpConnection, b.o.soak, b.o.workers, b.warmup())
	rss, heap := st.proxies.mem()
	held := st.proxies.held()
	fmt.Fprintf(stdout, "gateway with %d claims loaded, before the soak: RSS %.1f MiB, live heap %.1f MiB; claims snapshots %.1f MiB (%.1f B/claim, with their building's scratch until it is collected)\n\n",
		b.o.claims, mib(rss), mib(heap), mib(held), float64(held)/float64(b.o.claims))
	fmt.Fprintf(stdout, "%8s %8s %10s %10s %8s %6s %8s %9s %6s\n", "t s", "req/s", "ok", "nonce-full", "errors", "CPU %", "RSS MiB", "heap MiB", "ready")

	var counts soakCounts
	ctx, cancel := context.WithTimeout(b.ctx, b.o.soak)
	defer cancel()
	rctx, rcancel := context.WithTimeout(b.ctx, b.o.soak+requestGrace)
	defer rcancel()
	var wg sync.WaitGroup
	for range b.o.workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := soakSend(rctx, client, st.agent, url, &counts); err != nil && !errors.Is(err, errNonceStoreFull) {
					counts.fail(err)
				}
			}
		})
	}

	var rows []soakRow
	start, last := time.Now(), time.Now()
	lastCPU := st.proxies.cpu()
	var lastOK, lastFull, lastFailed int64
	tick := time.NewTicker(b.o.soakEvery)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-tick.C:
		case <-ctx.Done():
			done = true
		}
		now, cpu := time.Now(), st.proxies.cpu()
		ok, full, failed := counts.ok.Load(), counts.full.Load(), counts.failed.Load()
		r := soakRow{at: now.Sub(start), ok: ok - lastOK, full: full - lastFull, failed: failed - lastFailed,
			cpu: 100 * (cpu - lastCPU).Seconds() / now.Sub(last).Seconds(), ready: readiness(b.ctx, st.gateway)}
		r.rps = float64(r.ok) / now.Sub(last).Seconds()
		r.rss, r.heap = st.proxies.mem()
		rows = append(rows, r)
		fmt.Fprintf(stdout, "%8.0f %8.0f %10d %10d %8d %6.0f %8.1f %9.1f %6d\n",
			r.at.Seconds(), r.rps, r.ok, r.full, r.failed, r.cpu, mib(r.rss), mib(r.heap), r.ready)
		last, lastCPU, lastOK, lastFull, lastFailed = now, cpu, ok, full, failed
	}
	wg.Wait()
	elapsed := time.Since(start)
	ok, full, failed := counts.ok.Load(), counts.full.Load(), counts.failed.Load()
	fmt.Fprintf(stdout, "\ntotal: %d requests in %.0f s, %.0f ok req/s; %d answered 503 NONCE_STORE_FULL, %d other errors",
		ok+full+failed, elapsed.Seconds(), float64(ok)/elapsed.Seconds(), full, failed)
	if counts.first != "" {
		fmt.Fprintf(stdout, " (first: %s)", counts.first)
	}
	fmt.Fprintln(stdout)
	warm := b.warmup()
	var lo, hi, heapLo, heapHi int64
	for _, r := range rows {
		if r.at < warm || r.rss == 0 {
			continue
		}
		if lo == 0 || r.rss < lo {
			lo = r.rss
		}
		hi = max(hi, r.rss)
		if heapLo == 0 || r.heap < heapLo {
			heapLo = r.heap
		}
		heapHi = max(heapHi, r.heap)
	}
	if hi > 0 {
		fmt.Fprintf(stdout, "after warm-up (t ≥ %.0f s): gateway RSS %.1f to %.1f MiB, live heap %.1f to %.1f MiB\n",
			warm.Seconds(), mib(lo), mib(hi), mib(heapLo), mib(heapHi))
	}
	held = st.proxies.held()
	fmt.Fprintf(stdout, "claims snapshots at the end: %.1f MiB (%.1f bytes per claim)\n", mib(held), float64(held)/float64(b.o.claims))
	if parts := st.proxies.breakdown(); parts != "" {
		fmt.Fprintf(stdout, "gateway memory at the end, MiB, not returned to the system: %s\n", parts)
	}
	if full+failed > 0 {
		return fmt.Errorf("%d requests failed", full+failed)
	}
	return nil
}

// warmup is the part of the soak its memory may grow in.
func (b *bench) warmup() time.Duration { return min(soakWarmup, b.o.soak*3/4) }

// errNonceStoreFull is a 503 NONCE_STORE_FULL answer.
var errNonceStoreFull = errors.New("503 NONCE_STORE_FULL")

// soakSend signs and sends one request, and counts its outcome.
func soakSend(ctx context.Context, client *http.Client, agent *identity.Identity, url string, counts *soakCounts) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if err := agent.Sign(req, identity.SignOptions{}); err != nil {
		return err
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	switch {
	case err != nil:
		return err
	case res.StatusCode == http.StatusOK:
		counts.ok.Add(1)
		return nil
	case res.StatusCode == http.StatusServiceUnavailable && codeOf(body) == errcode.NonceStoreFull:
		counts.full.Add(1)
		return errNonceStoreFull
	}
	return fmt.Errorf("status %d: %s", res.StatusCode, bytes.TrimSpace(body[:min(len(body), 300)]))
}

// codeOf is the code of an error envelope; INTERNAL_ERROR for anything
// else.
func codeOf(body []byte) errcode.Code {
	var env struct {
		Code errcode.Code `json:"code"`
	}
	_ = json.Unmarshal(body, &env)
	return env.Code
}

// readiness is the status of the gateway's /health/ready (0 when it does
// not answer).
func readiness(ctx context.Context, gateway string) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gateway+"/health/ready", nil)
	if err != nil {
		return 0
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
