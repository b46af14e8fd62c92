// Command bench measures the idn gateway against the physical limit, on
// 127.0.0.1.
//
// It starts a small upstream HTTP server, a real control plane and a go-sdk
// MCP server. The control plane runs on SQLite in a temporary directory,
// seeded through its test seed route with one service and -claims approved
// claims. In a child process pinned to its own CPUs (proxies.go), it
// starts a real gateway composed by package gateway, in front of the
// upstream and the MCP server. Beside it runs a baseline: a bare
// httputil.ReverseProxy doing one ed25519.Verify per request. Then it
// loads each of these for -duration, at maximum throughput (closed loop,
// -workers workers) and at a fixed rate (open loop, by default half the
// maximum):
//
//   - upstream, baseline and gateway (/proxy/<connection>/…) with small GETs.
//   - MCP tool calls through the gateway, against a direct go-sdk client
//     session. Through the gateway they go to the REST route
//     (/mcp/<connection>/tools/echo/call) and to the MCP endpoint.
//   - MCP 2026-07-28 tool calls, with no session, to a stateless server.
//   - The control plane's approved-claims feed (GET /v1/namespaces/claims,
//     signed, with the service key), page by page.
//
// Each phase is split into -rounds rounds that alternate between the
// targets compared, so other load on the machine weighs on each alike.
// Signed requests are signed before their round, each with its own nonce,
// so the client's signing cost is not measured. The fixed-rate mode works
// like wrk2: requests are scheduled at the rate and sent in order by the
// same number of workers. Each latency runs from the request's scheduled
// send time, so a server that stalls is charged for the requests queued
// behind it (no coordinated omission).
//
// Usage:
//
//	go run ./bench [-duration 3s] [-rounds 5] [-workers N] [-rate R] [-json]
//	go run ./bench -soak 10m [-soak-every 30s] [-workers N] [-memory-feed -claims N]
//	go run ./bench -scale [-duration 3s] [-rounds 5] [-workers N] [-claims N]
//	go run ./bench -redis redis://127.0.0.1:6379 [flags]
//
// With -redis the gateway keeps its nonces in that Redis, as a fleet's
// replicas do (GATEWAY_REDIS_URL); compare its gateway rows with a run
// without it.
//
// With -soak it runs no phases. It loads the gateway route at its maximum
// rate for that long, each request signed as it is sent. It reports the
// rate, NONCE_STORE_FULL answers, errors and the gateway's memory over
// time (soak.go). With -memory-feed its control plane is claimcachetest's
// in-memory claims API. That one holds a million claims at once, where the
// real one takes minutes to seed them.
//
// With -scale it runs the gateway and the baseline on 1, 2, 4, … cores in
// turn. It reports their rate, CPU per request, memory and added latency
// at each count (scale.go).
//
// The report is a table on stdout (or JSON with -json); progress goes to
// stderr. The exit status is 1 when any request failed. README.md explains
// every figure.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	if os.Getenv(roleEnv) == roleProxies {
		os.Exit(proxiesMain(os.Stdin, os.Stdout, os.Stderr))
	}
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
	rounds                  int
	workers                 int
	rate, mcpRate, feedRate float64
	claims, page            int
	json                    bool
	cpuProfile              string
	profilePhase            string
	soak, soakEvery         time.Duration
	memoryFeed              bool
	scale                   bool
	redis                   string
}

// Bounds of the flags, so that a run always ends in reasonable time.
const (
	maxPhase  = time.Minute
	maxClaims = 200_000
	// maxMemoryFeedClaims bounds -claims with -memory-feed.
	maxMemoryFeedClaims = 4_000_000
	maxPage             = 2000 // the control plane's largest feed page
	maxSoak             = 24 * time.Hour
)

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 3*time.Second, "timed length of each of the 20 phases (at most 1m)")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds each phase is split into, alternating with the phases it is compared with")
	fs.IntVar(&o.workers, "workers", 2*runtime.GOMAXPROCS(0)*4, "concurrent workers (and connections) per target, in both modes")
	fs.Float64Var(&o.rate, "rate", 0, "req/s of the fixed-rate upstream, baseline and gateway phases (0: half the gateway's max)")
	fs.Float64Var(&o.mcpRate, "mcp-rate", 0, "calls/s of the fixed-rate MCP phases (0: half the gateway's MCP max)")
	fs.Float64Var(&o.feedRate, "feed-rate", 0, "pages/s of the fixed-rate feed phase (0: half the feed's max)")
	fs.IntVar(&o.claims, "claims", 10_000, "approved claims seeded in the control plane's feed")
	fs.IntVar(&o.page, "page", 2000, "claims per feed page (at most 2000)")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of one phase (see -profile) to this file, from the process serving its target")
	fs.StringVar(&o.profilePhase, "profile", TargetGateway+"/"+ModeMax, "the phase -cpuprofile profiles, as target/mode")
	fs.DurationVar(&o.soak, "soak", 0, "instead of the phases, load the gateway route at its maximum rate for this long, "+
		"signing each request as it is sent, and report rate, NONCE_STORE_FULL, errors and the gateway's memory over time (at most 24h)")
	fs.BoolVar(&o.scale, "scale", false, "instead of the phases, measure the gateway and the baseline pinned to 1, 2, 4, … cores (see bench/README.md)")
	fs.DurationVar(&o.soakEvery, "soak-every", 30*time.Second, "interval of the soak's report rows")
	fs.BoolVar(&o.memoryFeed, "memory-feed", false, "with -soak: serve the claims from claimcachetest's in-memory claims API instead of the control plane, "+
		fmt.Sprintf("which holds up to %d at once (a million in seconds)", maxMemoryFeedClaims))
	fs.StringVar(&o.redis, "redis", "", "keep the gateway's nonces in this Redis (as GATEWAY_REDIS_URL), to compare with memory")
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
	if o.rounds < 1 || o.rounds > 100 || (o.duration > 0 && o.duration/time.Duration(max(o.rounds, 1)) < 10*time.Millisecond) {
		problems = append(problems, "-rounds must be in [1, 100], with rounds of at least 10ms")
	}
	if o.workers < 1 || o.workers > maxWorkers {
		problems = append(problems, fmt.Sprintf("-workers must be in [1, %d]", maxWorkers))
	}
	for name, r := range map[string]float64{"-rate": o.rate, "-mcp-rate": o.mcpRate, "-feed-rate": o.feedRate} {
		if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			problems = append(problems, name+" must be a non-negative number")
		}
	}
	most := maxClaims
	if o.memoryFeed {
		most = maxMemoryFeedClaims
	}
	if o.claims < 1 || o.claims > most {
		problems = append(problems, fmt.Sprintf("-claims must be in [1, %d]", most))
	}
	if o.memoryFeed && o.soak == 0 {
		problems = append(problems, "-memory-feed needs -soak")
	}
	if o.page < 1 || o.page > maxPage {
		problems = append(problems, fmt.Sprintf("-page must be in [1, %d]", maxPage))
	}
	if o.soak < 0 || o.soak > maxSoak || o.soakEvery <= 0 || (o.soak > 0 && o.soakEvery > o.soak) {
		problems = append(problems, fmt.Sprintf("-soak must be in [0, %s] and -soak-every in (0, -soak]", maxSoak))
	}
	if target, mode, _ := strings.Cut(o.profilePhase, "/"); !slices.Contains(targets, target) || (mode != ModeMax && mode != ModeRate) {
		problems = append(problems, fmt.Sprintf("-profile must be target/mode with a target among %s and mode %s or %s",
			strings.Join(targets, ", "), ModeMax, ModeRate))
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
	stderr = &syncWriter{w: stderr} // the child process writes to it too
	dir, cleanup, err := tempDir()
	if err != nil {
		return err
	}
	defer cleanup()

	cpus := allowedCPUs() // before startStack pins this process to some of them
	fmt.Fprintf(stderr, "starting upstream, MCP server, control plane (%d claims), gateway and baseline on 127.0.0.1\n", o.claims)
	// Seeding the control plane's SQLite takes the most of it: over six
	// minutes for a million claims on a busy 2-CPU machine.
	setupCtx, cancel := context.WithTimeout(ctx, time.Minute+time.Duration(o.claims)*300*time.Microsecond)
	st, err := startStack(setupCtx, dir, o.claims, o.memoryFeed, o.redis, stderr)
	cancel()
	if err != nil {
		return err
	}
	defer st.close()

	b := &bench{ctx: ctx, o: o, st: st, progress: stderr, report: &Report{
		Machine: machine(st.proxies.proxyAddrs),
		Settings: Settings{PhaseSeconds: o.duration.Seconds(), Rounds: o.rounds, Workers: o.workers,
			FeedClaims: o.claims, FeedPage: o.page},
	}}
	defer b.closeIdle()
	if o.soak > 0 {
		return b.soak(stdout)
	}
	if o.scale {
		return b.scale(stdout, dir, cpus)
	}
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

// startProfile starts a CPU profile of the whole process (client and
// servers alike) into path.
func startProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func machine(proxies proxyAddrs) Machine {
	return Machine{
		CPUs: runtime.NumCPU(), CPUModel: cpuModel(),
		LoadCPUs: allowedCPUs(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		ProxyCPUs: proxies.CPUs, ProxyGOMAXPROCS: proxies.GOMAXPROCS,
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

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
