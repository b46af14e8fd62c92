package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/gateway/gctune"
	"github.com/idnhq/idn/replay"
)

// The measured side of the stack, the gateway and the baseline, runs in a
// child process: the same executable started with roleEnv set. On
// separate hosts, the proxies would not queue behind the client and the
// upstream they are measured with. So when the machine has two CPUs or
// more, the child is pinned to one half of them. This process (load
// generator, upstream, MCP server, control plane) takes the other half.
// Each side also collects only its own garbage.
//
// The parent writes the child one JSON proxyConfig line on its stdin; the
// child answers one JSON proxyAddrs line on its stdout, then serves
// commands, one per line, until its stdin closes:
//
//	cpu             answers the child's CPU time in nanoseconds
//	mem             answers the child's resident set and live heap, in bytes
//	profile <path>  starts a CPU profile into path; answers "ok" or the error
//	stop            stops the profile; answers "ok"
const (
	roleEnv     = "IDN_BENCH_ROLE"
	roleProxies = "proxies"
)

// proxyConfig is what the child needs to start the proxies.
type proxyConfig struct {
	Upstream, MCPServer, StatelessServer, ControlPlane string // base URLs
	ServiceKey                                         string
	Dir                                                string // for the gateway's data
	Claims                                             int    // in the feed, for how long its first load may take
	Redis                                              string // the gateway's nonces in this Redis; empty: in memory
}

// proxyAddrs is the child's answer: where the proxies listen.
type proxyAddrs struct {
	Gateway, Baseline string // base URLs
	GOMAXPROCS        int
	CPUs              []int // the child's allowed CPUs (nil: unknown)
}

// proxiesMain is the child's main; it returns the exit code.
func proxiesMain(stdin io.Reader, stdout, stderr io.Writer) int {
	if err := serveProxies(context.Background(), stdin, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "bench proxies:", err)
		return 1
	}
	return 0
}

func serveProxies(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	in := bufio.NewScanner(stdin)
	if !in.Scan() {
		return fmt.Errorf("no configuration on stdin: %v", in.Err())
	}
	var cfg proxyConfig
	if err := json.Unmarshal(in.Bytes(), &cfg); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	// As cmd/gateway does with its defaults; the baseline shares the process.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gctune.Percent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(replay.DefaultMaxBytes + gctune.MemoryHeadroom)
	}
	s := &stack{upstream: cfg.Upstream, mcpServer: cfg.MCPServer, statelessServer: cfg.StatelessServer, controlPlane: cfg.ControlPlane, serviceKey: cfg.ServiceKey}
	defer s.close()
	var err error
	if s.baseline, err = s.startBaseline(); err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := s.startGateway(ctx, cfg.Dir, cfg.Claims, cfg.Redis, logger); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if os.Getenv("GOGC") == "" {
		defer gctune.Tune(gctune.Percent, s.gw.HeldBytes)()
	}
	out := json.NewEncoder(stdout)
	addrs := proxyAddrs{Gateway: s.gateway, Baseline: s.baseline, GOMAXPROCS: runtime.GOMAXPROCS(0), CPUs: allowedCPUs()}
	if err := out.Encode(addrs); err != nil {
		return err
	}
	stopProfile := func() {}
	defer func() { stopProfile() }()
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		answer := "ok"
		switch cmd {
		case "cpu":
			answer = strconv.FormatInt(int64(processCPU()), 10)
		case "mem":
			answer = fmt.Sprint(residentBytes(), " ", liveHeap())
		case "held":
			answer = strconv.FormatInt(s.gw.Claims().HeldBytes(), 10)
		case "breakdown":
			answer = memoryBreakdown(s.gw)
		case "profile":
			stop, err := startProfile(arg)
			if err != nil {
				answer = err.Error()
			} else {
				stopProfile = stop
			}
		case "stop":
			stopProfile()
			stopProfile = func() {}
		default:
			answer = "unknown command " + strconv.Quote(cmd)
		}
		if _, err := fmt.Fprintln(stdout, answer); err != nil {
			return err
		}
	}
	return in.Err()
}

// proxyProcess is the parent's handle on the child.
type proxyProcess struct {
	proxyAddrs

	cmd *exec.Cmd
	in  io.WriteCloser
	mu  sync.Mutex // one command at a time
	out *bufio.Scanner
}

// startProxies starts the child with cfg by start (startSplit, or a
// startPinned for one core count), and waits until its proxies are ready.
func startProxies(ctx context.Context, cfg proxyConfig, stderr io.Writer, start func(*exec.Cmd) error) (*proxyProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), roleEnv+"="+roleProxies)
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &proxyProcess{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if err := start(cmd); err != nil {
		return nil, err
	}
	ready := make(chan error, 1)
	go func() {
		if err := json.NewEncoder(in).Encode(cfg); err != nil {
			ready <- err
			return
		}
		if !p.out.Scan() {
			ready <- errors.New("the proxies' process ended before it was ready (its errors are above)")
			return
		}
		ready <- json.Unmarshal(p.out.Bytes(), &p.proxyAddrs)
	}()
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// command sends one command line and returns the child's answer.
func (p *proxyProcess) command(line string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := fmt.Fprintln(p.in, line); err != nil {
		return "", err
	}
	if !p.out.Scan() {
		return "", errors.New("the proxies' process ended")
	}
	return p.out.Text(), nil
}

// cpu is the child's CPU time so far (0 when it cannot be had).
func (p *proxyProcess) cpu() time.Duration {
	answer, err := p.command("cpu")
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(answer, 10, 64)
	return time.Duration(n)
}

// mem is the child's resident set and live heap, in bytes (0 when they
// cannot be had).
func (p *proxyProcess) mem() (rss, heap int64) {
	answer, err := p.command("mem")
	if err != nil {
		return 0, 0
	}
	_, _ = fmt.Sscan(answer, &rss, &heap)
	return rss, heap
}

// held is the memory the gateway's claims snapshots hold
// (claimcache.Cache.HeldBytes).
func (p *proxyProcess) held() int64 {
	answer, err := p.command("held")
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(answer, 10, 64)
	return n
}

// memoryBreakdown is where the process's memory goes, as "name MiB"
// pairs. The parts are the claims snapshots and the nonce store's tables,
// the rest of the heap's objects, and the heap's free and unused bytes not
// returned to the system. Goroutine stacks and the runtime's own follow.
func memoryBreakdown(gw *gateway.Gateway) string {
	names := []string{
		"/memory/classes/heap/objects:bytes",
		"/memory/classes/heap/free:bytes",
		"/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/stacks:bytes",
		"/memory/classes/os-stacks:bytes",
		"/memory/classes/total:bytes",
		"/memory/classes/heap/released:bytes",
	}
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	metrics.Read(samples)
	v := func(i int) int64 {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(samples[i].Value.Uint64())
	}
	claims := gw.Claims().HeldBytes()
	tables := gw.HeldBytes() - claims
	stacks := v(3) + v(4)
	runtimeOwn := v(5) - v(6) - v(0) - v(1) - v(2) - stacks
	return fmt.Sprintf("claims-snapshots %.1f nonce-tables %.1f other-objects %.1f heap-free-and-unused %.1f stacks %.1f runtime %.1f",
		mib(claims), mib(tables), mib(v(0)-claims-tables), mib(v(1)+v(2)), mib(stacks), mib(runtimeOwn))
}

// breakdown is the child's memoryBreakdown ("" when it cannot be read).
func (p *proxyProcess) breakdown() string {
	answer, err := p.command("breakdown")
	if err != nil {
		return ""
	}
	return answer
}

// liveHeap is the heap held by live and not yet swept objects, read
// without stopping the world.
func liveHeap() int64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(sample[0].Value.Uint64())
}

// profile starts a CPU profile of the child into path.
func (p *proxyProcess) profile(path string) (stop func(), err error) {
	answer, err := p.command("profile " + path)
	if err == nil && answer != "ok" {
		err = errors.New(answer)
	}
	if err != nil {
		return nil, err
	}
	return func() { _, _ = p.command("stop") }, nil
}

// close ends the child: it stops its servers when its stdin closes.
func (p *proxyProcess) close() {
	_ = p.in.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}
