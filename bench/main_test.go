package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/bits"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the bench's child process too.
func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == roleProxies {
		os.Exit(proxiesMain(os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestRun runs the whole program with tiny phases: every target and mode
// must be reported with traffic and without errors, and the derived
// figures must be filled in.
func TestRun(t *testing.T) {
	var out, progress bytes.Buffer
	// Few workers and a small feed keep it quick under -race too.
	err := run(t.Context(), []string{"-duration=200ms", "-rounds=2", "-workers=4", "-claims=1000", "-page=250", "-json"}, &out, &progress)
	if err != nil {
		t.Errorf("run: %v\n%s", err, progress.String()) // the report says more
	}
	var r Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out.String())
	}
	want := []struct{ target, mode string }{
		{TargetUpstream, ModeMax}, {TargetBaseline, ModeMax}, {TargetGateway, ModeMax},
		{TargetUpstream, ModeRate}, {TargetBaseline, ModeRate}, {TargetGateway, ModeRate},
		{TargetMCPDirect, ModeMax}, {TargetMCPGateway, ModeMax}, {TargetMCPNative, ModeMax}, {TargetMCPNativeSDK, ModeMax},
		{TargetMCPDirect, ModeRate}, {TargetMCPGateway, ModeRate}, {TargetMCPNative, ModeRate}, {TargetMCPNativeSDK, ModeRate},
		{TargetMCPStatelessDirect, ModeMax}, {TargetMCPStateless, ModeMax}, {TargetMCPStatelessDirect, ModeRate}, {TargetMCPStateless, ModeRate},
		{TargetFeed, ModeMax}, {TargetFeed, ModeRate},
	}
	if len(r.Results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(r.Results), len(want), r.Results)
	}
	for i, w := range want {
		got := r.Results[i]
		if got.Target != w.target || got.Mode != w.mode {
			t.Errorf("result %d is %s/%s, want %s/%s", i, got.Target, got.Mode, w.target, w.mode)
		}
		if got.RPS <= 0 || got.Requests == 0 || got.P50 <= 0 || got.Max < got.P99 || got.P99 < got.P50 {
			t.Errorf("%s/%s: implausible figures %+v", got.Target, got.Mode, got)
		}
		if got.Errors != 0 || got.FirstError != "" {
			t.Errorf("%s/%s: %d errors, first %q", got.Target, got.Mode, got.Errors, got.FirstError)
		}
		if got.Mode == ModeRate && got.Rate <= 0 {
			t.Errorf("%s/%s: no target rate", got.Target, got.Mode)
		}
	}
	if m := r.Machine; runtime.GOOS == "linux" && m.CPUs >= 2 {
		// The two sides run on separate CPUs, each with two Ps at least.
		if len(m.LoadCPUs) == 0 || len(m.ProxyCPUs) == 0 || slices.ContainsFunc(m.LoadCPUs, func(c int) bool { return slices.Contains(m.ProxyCPUs, c) }) ||
			m.GOMAXPROCS < 2 || m.ProxyGOMAXPROCS < 2 {
			t.Errorf("placement: load on CPUs %v (GOMAXPROCS %d), proxies on %v (GOMAXPROCS %d)", m.LoadCPUs, m.GOMAXPROCS, m.ProxyCPUs, m.ProxyGOMAXPROCS)
		}
	}
	if r.GatewayOverBaseline <= 0 || r.GatewayOverUpstream <= 0 || r.MCPGatewayOverDirect <= 0 || r.MCPNativeOverDirect <= 0 {
		t.Errorf("ratios missing: %+v", r)
	}
	if r.GatewayAdded.Rate <= 0 || r.MCPAdded.Rate <= 0 || r.MCPNativeAdded.Rate <= 0 || r.MCPNativeSDKAdded.Rate <= 0 || r.MCPStatelessAdded.Rate <= 0 || r.FeedClaimsPerSecond <= 0 {
		t.Errorf("derived figures missing: added %+v, MCP %+v, feed %v", r.GatewayAdded, r.MCPAdded, r.FeedClaimsPerSecond)
	}
	if r.Machine.CPUs == 0 || r.Machine.GoVersion == "" || r.Settings.FeedClaims != 1000 || r.Settings.FeedPage != 250 || r.Settings.Rounds != 2 {
		t.Errorf("machine or settings missing: %+v %+v", r.Machine, r.Settings)
	}

	var table bytes.Buffer
	if err := r.writeTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"upstream", "baseline", "gateway", "mcp-direct", "mcp-gateway", "mcp-native", "mcp-native-sdk", "mcp-stateless", "feed",
		"gateway/baseline", "added latency at", "MCP added latency", "MCP endpoint", "MCP 2026-07-28 added latency", "ms/page", "client signing cost excluded"} {
		if !strings.Contains(table.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, table.String())
		}
	}
}

func TestFlagsRejected(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"zero duration", []string{"-duration=0s"}, "-duration"},
		{"unbounded duration", []string{"-duration=2h"}, "-duration"},
		{"no workers", []string{"-workers=0"}, "-workers"},
		{"negative rate", []string{"-rate=-5"}, "-rate"},
		{"infinite feed rate", []string{"-feed-rate=+Inf"}, "-feed-rate"},
		{"page above the control plane's maximum", []string{"-page=2001"}, "-page"},
		{"no claims", []string{"-claims=0"}, "-claims"},
		{"a million claims for the control plane", []string{"-claims=1000000"}, "-claims"},
		{"memory feed without a soak", []string{"-memory-feed"}, "-memory-feed"},
		{"memory feed beyond its bound", []string{"-memory-feed", "-soak=1s", "-claims=5000000"}, "-claims"},
		{"rounds too short", []string{"-duration=50ms", "-rounds=10"}, "-rounds"},
		{"stray argument", []string{"gateway"}, "unexpected arguments"},
		{"profile of no phase", []string{"-profile=gateway/slow"}, "-profile"},
		{"profile of no target", []string{"-profile=nginx/max"}, "-profile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			_, err := parseFlags(tc.args, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseFlags(%v) = %v, want an error about %s", tc.args, err, tc.want)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	sorted := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5}, {0.9, 9}, {0.99, 10}, {1, 10}, {0.01, 1}, {0, 1}} {
		if got := percentile(sorted, tc.q); got != tc.want {
			t.Errorf("percentile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of nothing = %v, want 0", got)
	}
}

// A server that stalls is charged for every request scheduled during the
// stall, not only for the one it was serving (no coordinated omission).
func TestOpenLoopChargesStalls(t *testing.T) {
	const stall = 50 * time.Millisecond
	do := func(_ context.Context, i int) error {
		if i == 0 {
			time.Sleep(stall) // the server under test stalls
		}
		return nil
	}
	s := openLoop(t.Context(), do, 1, 1000, 100*time.Millisecond, processCPU)
	if len(s.lats) != 100 || s.errors != 0 {
		t.Fatalf("%d answers, %d errors; want 100, 0", len(s.lats), s.errors)
	}
	late := 0
	for _, l := range s.lats {
		if l >= 10*time.Millisecond {
			late++
		}
	}
	// Requests 1…39 were scheduled at least 10 ms before the stall ended.
	if late < 40 {
		t.Fatalf("%d requests charged with ≥ 10 ms, want at least 40 (the stalled one and those queued behind it)", late)
	}
}

func TestSampleMerge(t *testing.T) {
	a := sample{lats: []time.Duration{3 * time.Millisecond, time.Millisecond}, elapsed: time.Second}
	a.merge(sample{lats: []time.Duration{2 * time.Millisecond}, errors: 1, firstErr: errStopped, elapsed: time.Second, exhausted: true})
	r := a.result(1)
	if r.Requests != 4 || r.Errors != 1 || r.RPS != 2 || r.P50 != 2 || r.Max != 3 || !r.PoolExhausted || r.FirstError != errStopped.Error() {
		t.Fatalf("merged result %+v", r)
	}
}

// TestSoak runs a one-second soak: every row must have traffic, and no
// request may fail or meet a full nonce store.
func TestSoak(t *testing.T) {
	var out, progress bytes.Buffer
	err := run(t.Context(), []string{"-soak=1s", "-soak-every=250ms", "-workers=4", "-claims=100"}, &out, &progress)
	if err != nil {
		t.Errorf("run: %v\n%s", err, progress.String())
	}
	rows := 0
	for line := range strings.Lines(out.String()) {
		f := strings.Fields(line)
		if len(f) == 9 && f[0] != "t" {
			rows++
			if f[1] == "0" || f[3] != "0" || f[4] != "0" || f[8] != "200" {
				t.Errorf("row %q: want traffic, no NONCE_STORE_FULL, no errors, ready", strings.TrimSpace(line))
			}
		}
	}
	if rows < 4 || !strings.Contains(out.String(), "0 answered 503 NONCE_STORE_FULL, 0 other errors") {
		t.Errorf("%d rows; report:\n%s", rows, out.String())
	}
}

// TestSoakMemoryFeed soaks a gateway whose claims come from the in-memory
// feed, and checks that the report gives its memory and the snapshots'
// bytes per claim.
func TestSoakMemoryFeed(t *testing.T) {
	var out, progress bytes.Buffer
	err := run(t.Context(), []string{"-soak=1s", "-soak-every=500ms", "-workers=4", "-memory-feed", "-claims=5000"}, &out, &progress)
	if err != nil {
		t.Errorf("run: %v\n%s", err, progress.String())
	}
	for _, want := range []string{"gateway with 5000 claims loaded, before the soak: RSS", "claims snapshots at the end:", " bytes per claim)",
		"0 answered 503 NONCE_STORE_FULL, 0 other errors"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestScale runs -scale with short phases: a row per core count up to the
// CPUs there are, each with traffic, CPU per request and a resident set.
func TestScale(t *testing.T) {
	var out, progress bytes.Buffer
	err := run(t.Context(), []string{"-scale", "-duration=200ms", "-rounds=1", "-workers=4", "-claims=100"}, &out, &progress)
	if err != nil {
		t.Errorf("run: %v\n%s", err, progress.String())
	}
	rows := 0
	for line := range strings.Lines(out.String()) {
		f := strings.Fields(line)
		if len(f) != 11 || f[0] == "cores" {
			continue
		}
		rows++
		if f[0] != strconv.Itoa(1<<(rows-1)) || f[1] == "0" || f[2] == "0" || f[4] == "0.0" || f[6] == "0.0" {
			t.Errorf("row %q: want the core count, both rates, CPU per request and RSS", strings.TrimSpace(line))
		}
	}
	if want := bits.Len(uint(len(allowedCPUs()))); runtime.GOOS == "linux" && rows != want {
		t.Errorf("%d rows, want %d; report:\n%s", rows, want, out.String())
	}
}
