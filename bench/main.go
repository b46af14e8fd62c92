// Command bench measures the idn gateway against the physical limit, all
// in one process on 127.0.0.1 (issue 8, item 2).
//
// It starts a small upstream HTTP server, a real control plane (SQLite in a
// temporary directory, seeded through its test seed route with one service
// and -claims approved claims), a real gateway composed by
// internal/gatewayd, a baseline that is a bare httputil.ReverseProxy doing
// one ed25519.Verify per request, and a go-sdk MCP server behind the
// gateway. Then it loads, each for -duration:
//
//   - upstream, baseline and gateway (/proxy/<connection>/…) with small GETs,
//     at maximum throughput (closed loop, -workers concurrent workers) and
//     at a fixed rate (open loop, by default half the gateway's maximum);
//   - MCP tool calls: POST /mcp/<connection>/tools/echo/call through the
//     gateway against a direct go-sdk client session, in both modes;
//   - the control plane's approved-claims feed (GET /v1/namespaces/claims,
//     signed, with the service key), page by page, in both modes.
//
// Signed requests are signed before their timed phase, each with its own
// nonce, so the client's signing cost is not measured. In rate mode the
// latency of a request runs from its scheduled send time, so a server that
// stalls is charged for the requests queued behind it (no coordinated
// omission).
//
// Usage:
//
//	go run ./bench [-duration 3s] [-workers N] [-rate R] [-json]
//
// The report is a table on stdout (or JSON with -json); progress goes to
// stderr. The exit status is 1 when any request failed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/idnhq/idn/identity"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
		os.Exit(1)
	}
}

// options are the command-line flags.
type options struct {
	duration                time.Duration
	workers                 int
	rate, mcpRate, feedRate float64
	claims, page            int
	json                    bool
	cpuProfile              string
}

// Bounds of the flags, so that a run always ends in reasonable time.
const (
	maxPhase  = time.Minute
	maxClaims = 200_000
	maxPage   = 2000 // the control plane's largest feed page
)

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 3*time.Second, "length of each of the 12 timed phases (at most 1m)")
	fs.IntVar(&o.workers, "workers", 2*runtime.GOMAXPROCS(0)*4, "concurrent workers in max-throughput phases")
	fs.Float64Var(&o.rate, "rate", 0, "req/s of the fixed-rate upstream, baseline and gateway phases (0: half the gateway's max)")
	fs.Float64Var(&o.mcpRate, "mcp-rate", 0, "calls/s of the fixed-rate MCP phases (0: half the gateway's MCP max)")
	fs.Float64Var(&o.feedRate, "feed-rate", 0, "pages/s of the fixed-rate feed phase (0: half the feed's max)")
	fs.IntVar(&o.claims, "claims", 10_000, "approved claims seeded in the control plane's feed")
	fs.IntVar(&o.page, "page", 2000, "claims per feed page (at most 2000)")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the gateway's max-throughput phase to this file")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var problems []string
	if fs.NArg() > 0 {
		problems = append(problems, "unexpected arguments: "+strings.Join(fs.Args(), " "))
	}
	if o.duration <= 0 || o.duration > maxPhase {
		problems = append(problems, fmt.Sprintf("-duration must be in (0, %s]", maxPhase))
	}
	if o.workers < 1 || o.workers > maxInFlight {
		problems = append(problems, fmt.Sprintf("-workers must be in [1, %d]", maxInFlight))
	}
	for name, r := range map[string]float64{"-rate": o.rate, "-mcp-rate": o.mcpRate, "-feed-rate": o.feedRate} {
		if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			problems = append(problems, name+" must be a non-negative number")
		}
	}
	if o.claims < 1 || o.claims > maxClaims {
		problems = append(problems, fmt.Sprintf("-claims must be in [1, %d]", maxClaims))
	}
	if o.page < 1 || o.page > maxPage {
		problems = append(problems, fmt.Sprintf("-page must be in [1, %d]", maxPage))
	}
	if len(problems) > 0 {
		return o, errors.New(strings.Join(problems, "; "))
	}
	return o, nil
}

// run is the whole program; main only adds the signals and the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	dir, cleanup, err := tempDir()
	if err != nil {
		return err
	}
	defer cleanup()

	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fmt.Fprintf(stderr, "starting upstream, control plane (%d claims), gateway, baseline and MCP server on 127.0.0.1\n", o.claims)
	setupCtx, cancel := context.WithTimeout(ctx, time.Minute)
	st, err := startStack(setupCtx, dir, o.claims, logger)
	cancel()
	if err != nil {
		return err
	}
	defer st.close()

	b := &bench{ctx: ctx, o: o, st: st, progress: stderr, report: &Report{
		Machine: machine(),
		Settings: Settings{PhaseSeconds: o.duration.Seconds(), Workers: o.workers,
			FeedClaims: o.claims, FeedPage: o.page},
	}}
	defer b.closeIdle()
	if err := b.runAll(); err != nil {
		return err
	}
	r := b.report
	r.derive()
	if o.json {
		err = r.writeJSON(stdout)
	} else {
		err = r.writeTable(stdout)
	}
	if err != nil {
		return err
	}
	if n := r.errorCount(); n > 0 {
		return fmt.Errorf("%d requests failed", n)
	}
	return nil
}

// bench runs the phases against a started stack.
type bench struct {
	ctx      context.Context
	o        options
	st       *stack
	progress io.Writer
	report   *Report
	clients  []*http.Client
}

// newClient returns a client for one target, kept so that closeIdle can
// close its connections.
func (b *bench) newClient() *http.Client {
	c := newClient()
	b.clients = append(b.clients, c)
	return c
}

// closeIdle closes the clients' connections before the servers stop, so a
// graceful shutdown has no connection left to wait for (net/http waits up
// to 5 s for connections that were dialed but never used).
func (b *bench) closeIdle() {
	for _, c := range b.clients {
		c.CloseIdleConnections()
	}
}

func (b *bench) runAll() error {
	d := b.o.duration
	st := b.st
	const path = "/v1/items/42"

	// HTTP: upstream, baseline, gateway.
	upstream := &httpTarget{client: b.newClient(), method: "GET", urls: []string{st.upstream + path}}
	if err := signOnce(upstream, st.agent, st.gateway+"/proxy/"+httpConnection+path); err != nil {
		return err
	}
	baseline := &httpTarget{client: b.newClient(), method: "GET", urls: []string{st.baseline + path}}
	gateway := &httpTarget{client: b.newClient(), method: "GET", urls: []string{st.gateway + "/proxy/" + httpConnection + path}}
	if err := b.check(gateway, st.agent, nil, `"credential":true`); err != nil {
		return fmt.Errorf("gateway check: %w", err)
	}
	up, err := b.max(TargetUpstream, upstream, nil, 0)
	if err != nil {
		return err
	}
	pool := signedPool(up.RPS, d)
	if _, err := b.max(TargetBaseline, baseline, st.agent, pool); err != nil {
		return err
	}
	gw, err := b.max(TargetGateway, gateway, st.agent, pool)
	if err != nil {
		return err
	}
	rate := half(b.o.rate, gw.RPS)
	for _, t := range []struct {
		name   string
		target *httpTarget
		signer *identity.Identity
	}{{TargetUpstream, upstream, nil}, {TargetBaseline, baseline, st.agent}, {TargetGateway, gateway, st.agent}} {
		if err := b.atRate(t.name, t.target, t.signer, rate); err != nil {
			return err
		}
	}

	// MCP: a direct go-sdk session against tool calls through the gateway.
	direct := mcpDirect{st.mcpSession}
	viaGateway := &httpTarget{client: b.newClient(), method: "POST", body: []byte(`{"text":"hello"}`),
		urls: []string{st.gateway + "/mcp/" + mcpConnection + "/tools/" + echoTool + "/call"}}
	if err := b.check(viaGateway, st.agent, nil, `"hello"`); err != nil {
		return fmt.Errorf("MCP through the gateway: %w", err)
	}
	dm := b.phase(TargetMCPDirect, ModeMax, func() Result { return closedLoop(b.ctx, direct.do, b.o.workers, 0, d) })
	gm, err := b.max(TargetMCPGateway, viaGateway, st.agent, signedPool(dm.RPS, d))
	if err != nil {
		return err
	}
	mcpRate := half(b.o.mcpRate, gm.RPS)
	b.phase(TargetMCPDirect, ModeRate, func() Result { return openLoop(b.ctx, direct.do, mcpRate, d) })
	if err := b.atRate(TargetMCPGateway, viaGateway, st.agent, mcpRate); err != nil {
		return err
	}

	// The control plane's feed, page by page, as a gateway reads it.
	feed := &httpTarget{client: b.newClient(), method: "GET"}
	for off := 0; off < b.o.claims; off += b.o.page {
		feed.urls = append(feed.urls, fmt.Sprintf("%s/v1/namespaces/claims?service=%s&limit=%d&offset=%d",
			st.controlPlane, serviceSlug, b.o.page, off))
	}
	key := map[string][]string{"Authorization": {"Bearer " + st.serviceKey}}
	if err := b.check(feed, st.feedReader, key, fmt.Sprintf(`"total":%d`, b.o.claims)); err != nil {
		return fmt.Errorf("feed check: %w", err)
	}
	// No 2,000-claim page is served in under 0.3 ms, so this pool outlasts
	// the phase on any machine this runs on; if not, the report says so.
	fm, err := b.maxWith(TargetFeed, feed, st.feedReader, key, int(3000*d.Seconds())+100)
	if err != nil {
		return err
	}
	return b.atRateWith(TargetFeed, feed, st.feedReader, key, half(b.o.feedRate, fm.RPS))
}

// max runs a max-throughput phase of t, first signing pool requests with
// signer when it is set.
func (b *bench) max(name string, t *httpTarget, signer *identity.Identity, pool int) (Result, error) {
	return b.maxWith(name, t, signer, nil, pool)
}

func (b *bench) maxWith(name string, t *httpTarget, signer *identity.Identity, extra map[string][]string, pool int) (Result, error) {
	if signer != nil {
		if err := b.sign(t, signer, extra, pool); err != nil {
			return Result{}, err
		}
	}
	profile := name == TargetGateway && b.o.cpuProfile != ""
	if profile {
		f, err := os.Create(b.o.cpuProfile)
		if err != nil {
			return Result{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return Result{}, err
		}
	}
	r := b.phase(name, ModeMax, func() Result { return closedLoop(b.ctx, t.do, b.o.workers, t.limit(), b.o.duration) })
	if profile {
		pprof.StopCPUProfile()
	}
	return r, b.ctx.Err()
}

// atRate runs a fixed-rate phase of t, first signing exactly the requests
// it will send.
func (b *bench) atRate(name string, t *httpTarget, signer *identity.Identity, rate float64) error {
	return b.atRateWith(name, t, signer, nil, rate)
}

func (b *bench) atRateWith(name string, t *httpTarget, signer *identity.Identity, extra map[string][]string, rate float64) error {
	if signer != nil {
		if err := b.sign(t, signer, extra, max(1, int(rate*b.o.duration.Seconds()))); err != nil {
			return err
		}
	}
	b.phase(name, ModeRate, func() Result { return openLoop(b.ctx, t.do, rate, b.o.duration) })
	return b.ctx.Err()
}

func (b *bench) sign(t *httpTarget, signer *identity.Identity, extra map[string][]string, n int) error {
	start := time.Now()
	if err := presign(t, signer, n, extra); err != nil {
		return fmt.Errorf("signing requests: %w", err)
	}
	fmt.Fprintf(b.progress, "  signed %d requests in %s\n", n, time.Since(start).Round(time.Millisecond))
	return nil
}

// phase runs one timed phase after a garbage collection, so that one
// phase's garbage is not collected during the next, and records it.
func (b *bench) phase(name, mode string, f func() Result) Result {
	runtime.GC()
	fmt.Fprintf(b.progress, "%-12s %-5s ", name, mode)
	r := f()
	r.Target = name
	fmt.Fprintf(b.progress, "%8.0f req/s  p50 %.3f ms  p99 %.3f ms  errors %d\n", r.RPS, r.P50, r.P99, r.Errors)
	b.report.Results = append(b.report.Results, r)
	return r
}

// check sends one signed request to t and requires a 200 whose body
// contains want, before anything is timed.
func (b *bench) check(t *httpTarget, signer *identity.Identity, extra map[string][]string, want string) error {
	if err := presign(t, signer, 1, extra); err != nil {
		return err
	}
	got := &strings.Builder{}
	if err := t.doInto(b.ctx, 0, got); err != nil {
		return err
	}
	if !strings.Contains(got.String(), want) {
		return fmt.Errorf("answer lacks %s: %.300s", want, got.String())
	}
	return nil
}

// signOnce gives t one fixed set of signed headers, signed for signedURL,
// so an unverifying target receives requests of the same size as the
// gateway does.
func signOnce(t *httpTarget, id *identity.Identity, signedURL string) error {
	probe := &httpTarget{method: t.method, urls: []string{signedURL}, body: t.body}
	if err := presign(probe, id, 1, nil); err != nil {
		return err
	}
	t.header = probe.header.Clone()
	t.header["Signature"] = []string{probe.sigs[0].sig}
	t.header["Signature-Input"] = []string{probe.sigs[0].input}
	return nil
}

// signedPool is how many requests to sign for a max-throughput phase
// through a proxy of a target that served directRPS: a proxy is not faster
// than what it proxies, so this outlasts the phase with a margin.
func signedPool(directRPS float64, d time.Duration) int {
	return min(int(directRPS*d.Seconds()*1.25)+1000, 2_000_000)
}

// half is the fixed rate: the flag when set, else half the measured max.
func half(flagRate, maxRPS float64) float64 {
	if flagRate > 0 {
		return flagRate
	}
	return max(1, math.Round(maxRPS/2))
}

func machine() Machine {
	return Machine{
		CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), CPUModel: cpuModel(),
		GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH,
		Date: time.Now().UTC().Format(time.RFC3339),
	}
}

// cpuModel reads the first "model name" of /proc/cpuinfo, if any.
func cpuModel() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.Lines(string(raw)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
