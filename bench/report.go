package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// Modes of a phase.
const (
	ModeMax  = "max"  // closed loop, as fast as the workers can go
	ModeRate = "rate" // open loop at a fixed rate
)

// Target names.
const (
	TargetUpstream   = "upstream"
	TargetBaseline   = "baseline"
	TargetGateway    = "gateway"
	TargetMCPDirect  = "mcp-direct"
	TargetMCPGateway = "mcp-gateway"
	TargetMCPNative  = "mcp-native"
	// TargetMCPNativeSDK is the MCP endpoint used by a go-sdk client session
	// that signs each request as it sends it.
	TargetMCPNativeSDK = "mcp-native-sdk"
	// TargetMCPStatelessDirect and TargetMCPStateless are tool calls of
	// MCP 2026-07-28 (no session) to a stateless server: direct, and
	// through the gateway's MCP endpoint.
	TargetMCPStatelessDirect = "mcp-stateless-direct"
	TargetMCPStateless       = "mcp-stateless"
	TargetFeed               = "feed"
)

// targets lists every target, in the order the phases run.
var targets = []string{TargetUpstream, TargetBaseline, TargetGateway, TargetMCPDirect, TargetMCPGateway, TargetMCPNative, TargetMCPNativeSDK,
	TargetMCPStatelessDirect, TargetMCPStateless, TargetFeed}

// Result is one phase: one target in one mode. Latencies are in
// milliseconds; in rate mode they run from each request's scheduled send
// time to the end of its answer.
type Result struct {
	Target        string  `json:"target"`
	Mode          string  `json:"mode"`
	Workers       int     `json:"workers,omitempty"`       // max mode
	Rate          float64 `json:"target_rps,omitempty"`    // rate mode
	Requests      int     `json:"requests"`                // sent, errors included
	Errors        int     `json:"errors"`                  // transport errors and non-200 answers
	Seconds       float64 `json:"seconds"`                 // wall time of the phase
	RPS           float64 `json:"rps"`                     // successful requests per second
	P50           float64 `json:"p50_ms"`                  // of successful requests
	P90           float64 `json:"p90_ms"`                  //
	P99           float64 `json:"p99_ms"`                  //
	Max           float64 `json:"max_ms"`                  //
	LagP99        float64 `json:"send_lag_p99_ms"`         // rate mode: how late the sender was
	CPU           float64 `json:"cpu_percent"`             // both processes' CPU use, in % of all CPUs (0: not measured)
	PerCPU        float64 `json:"requests_per_cpu_second"` // successful requests per CPU-second of the whole process
	PoolExhausted bool    `json:"pool_exhausted"`          // max mode: ran out of pre-signed requests before the duration
	FirstError    string  `json:"first_error,omitempty"`   //
}

// Added is the latency a proxy adds at a fixed rate: its percentiles minus
// the direct target's at the same rate.
type Added struct {
	Rate float64 `json:"rps"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
}

// Report is the whole run.
type Report struct {
	Machine  Machine  `json:"machine"`
	Settings Settings `json:"settings"`
	Results  []Result `json:"results"`

	GatewayOverBaseline float64 `json:"gateway_over_baseline_rps"`
	// GatewayOverBaselineCPU compares requests per CPU-second instead,
	// which holds when other processes take CPU from some rounds.
	GatewayOverBaselineCPU float64 `json:"gateway_over_baseline_per_cpu"`
	GatewayOverUpstream    float64 `json:"gateway_over_upstream_rps"`
	BaselineOverUpstream   float64 `json:"baseline_over_upstream_rps"`
	MCPGatewayOverDirect   float64 `json:"mcp_gateway_over_direct_rps"`
	MCPNativeOverDirect    float64 `json:"mcp_native_over_direct_rps"`
	GatewayAdded           Added   `json:"gateway_added_latency"`        // gateway − upstream at the HTTP rate
	BaselineAdded          Added   `json:"baseline_added_latency"`       // baseline − upstream at the HTTP rate
	MCPAdded               Added   `json:"mcp_added_latency"`            // mcp-gateway − mcp-direct at the MCP rate
	MCPNativeAdded         Added   `json:"mcp_native_added_latency"`     // mcp-native − mcp-direct at the MCP rate
	MCPNativeSDKAdded      Added   `json:"mcp_native_sdk_added_latency"` // mcp-native-sdk − mcp-direct at the MCP rate
	MCPStatelessAdded      Added   `json:"mcp_stateless_added_latency"`  // mcp-stateless − mcp-stateless-direct at their rate
	FeedClaimsPerSecond    float64 `json:"feed_claims_per_second"`       // at max throughput
}

// Machine describes where the run happened.
type Machine struct {
	CPUs int `json:"cpus"`
	// The load side (client, upstream, MCP server, control plane) and the
	// child process of the proxies: their CPUs (nil: not known) and
	// GOMAXPROCS.
	LoadCPUs        []int  `json:"load_cpus"`
	GOMAXPROCS      int    `json:"gomaxprocs"`
	ProxyCPUs       []int  `json:"proxy_cpus"`
	ProxyGOMAXPROCS int    `json:"proxy_gomaxprocs"`
	CPUModel        string `json:"cpu_model"`
	GoVersion       string `json:"go_version"`
	OS              string `json:"os"`
	Date            string `json:"date"`
}

// Settings are the run's parameters.
type Settings struct {
	PhaseSeconds float64 `json:"phase_seconds"`
	Rounds       int     `json:"rounds"`
	Workers      int     `json:"workers"`
	FeedClaims   int     `json:"feed_claims"`
	FeedPage     int     `json:"feed_page"`
}

func (r *Report) find(target, mode string) Result {
	for _, x := range r.Results {
		if x.Target == target && x.Mode == mode {
			return x
		}
	}
	return Result{}
}

// derive fills in the ratios and added latencies from the results.
func (r *Report) derive() {
	up, base, gw := r.find(TargetUpstream, ModeMax), r.find(TargetBaseline, ModeMax), r.find(TargetGateway, ModeMax)
	r.GatewayOverBaseline = ratio(gw.RPS, base.RPS)
	r.GatewayOverBaselineCPU = ratio(gw.PerCPU, base.PerCPU)
	r.GatewayOverUpstream = ratio(gw.RPS, up.RPS)
	r.BaselineOverUpstream = ratio(base.RPS, up.RPS)
	r.MCPGatewayOverDirect = ratio(r.find(TargetMCPGateway, ModeMax).RPS, r.find(TargetMCPDirect, ModeMax).RPS)
	r.GatewayAdded = added(r.find(TargetGateway, ModeRate), r.find(TargetUpstream, ModeRate))
	r.BaselineAdded = added(r.find(TargetBaseline, ModeRate), r.find(TargetUpstream, ModeRate))
	r.MCPAdded = added(r.find(TargetMCPGateway, ModeRate), r.find(TargetMCPDirect, ModeRate))
	r.MCPNativeOverDirect = ratio(r.find(TargetMCPNative, ModeMax).RPS, r.find(TargetMCPDirect, ModeMax).RPS)
	r.MCPNativeAdded = added(r.find(TargetMCPNative, ModeRate), r.find(TargetMCPDirect, ModeRate))
	r.MCPNativeSDKAdded = added(r.find(TargetMCPNativeSDK, ModeRate), r.find(TargetMCPDirect, ModeRate))
	r.MCPStatelessAdded = added(r.find(TargetMCPStateless, ModeRate), r.find(TargetMCPStatelessDirect, ModeRate))
	r.FeedClaimsPerSecond = math.Round(r.find(TargetFeed, ModeMax).RPS * float64(r.Settings.FeedPage))
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return math.Round(a/b*1000) / 1000
}

func added(proxied, direct Result) Added {
	return Added{Rate: proxied.Rate, P50: round3(proxied.P50 - direct.P50), P99: round3(proxied.P99 - direct.P99)}
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// bar says whether a figure meets issue 8's bar.
func bar(met bool, want string) string {
	if met {
		return "(bar " + want + ": met)"
	}
	return "(bar " + want + ": NOT met)"
}

// errorCount is the errors of every phase.
func (r *Report) errorCount() int {
	n := 0
	for _, x := range r.Results {
		n += x.Errors
	}
	return n
}

func (r *Report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeTable prints the plain-text report.
func (r *Report) writeTable(w io.Writer) error {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "idn bench: %d CPUs (%s), %s %s, %s\n", m.CPUs, m.CPUModel, m.GoVersion, m.OS, m.Date)
	fmt.Fprintf(&b, "client, upstream, MCP server and control plane on CPUs %s (GOMAXPROCS %d); gateway and baseline in a child process on CPUs %s (GOMAXPROCS %d).\n",
		cpuList(m.LoadCPUs), m.GOMAXPROCS, cpuList(m.ProxyCPUs), m.ProxyGOMAXPROCS)
	fmt.Fprintf(&b, "phases of %gs in %d rounds alternating between the targets compared, %d workers (connections) per target;\n",
		r.Settings.PhaseSeconds, r.Settings.Rounds, r.Settings.Workers)
	b.WriteString("max = closed loop; rate = open loop, latency from each scheduled send time.\n")
	b.WriteString("Signed requests are signed before each timed round, each with its own nonce (client signing cost excluded),\n")
	b.WriteString("except mcp-native-sdk's, which its go-sdk client signs as it sends them.\n")
	b.WriteString("CPU % counts both processes, as a share of all CPUs.\n\n")

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tmode\trequests\terrors\tRPS\tp50 ms\tp90 ms\tp99 ms\tmax ms\tCPU %\treq/CPU-s\tnote\t")
	for _, x := range r.Results {
		mode := fmt.Sprintf("max/%d", x.Workers)
		note := ""
		if x.Mode == ModeRate {
			mode = fmt.Sprintf("rate %.0f/s", x.Rate)
			note = fmt.Sprintf("send lag p99 %.3f ms", x.LagP99)
		}
		if x.PoolExhausted {
			note = "ran out of pre-signed requests"
		}
		if x.FirstError != "" {
			note = "first error: " + x.FirstError
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.0f\t%.0f\t%s\t\n",
			x.Target, mode, x.Requests, x.Errors, x.RPS, x.P50, x.P90, x.P99, x.Max, x.CPU, x.PerCPU, note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\nRPS ratios (max): gateway/baseline %.3f %s, gateway/upstream %.3f, baseline/upstream %.3f, mcp-gateway/mcp-direct %.3f, mcp-native/mcp-direct %.3f\n",
		r.GatewayOverBaseline, bar(r.GatewayOverBaseline >= 0.8, "≥ 0.8"), r.GatewayOverUpstream, r.BaselineOverUpstream, r.MCPGatewayOverDirect, r.MCPNativeOverDirect)
	fmt.Fprintf(&b, "requests per CPU-second (max): gateway/baseline %.3f\n", r.GatewayOverBaselineCPU)
	fmt.Fprintf(&b, "added latency at %.0f req/s (gateway - upstream): p50 %.3f ms, p99 %.3f ms %s  (baseline - upstream: p50 %.3f ms, p99 %.3f ms)\n",
		r.GatewayAdded.Rate, r.GatewayAdded.P50, r.GatewayAdded.P99, bar(r.GatewayAdded.P99 <= 2, "≤ 2 ms"), r.BaselineAdded.P50, r.BaselineAdded.P99)
	fmt.Fprintf(&b, "MCP added latency at %.0f calls/s (mcp-gateway - mcp-direct): p50 %.3f ms, p99 %.3f ms; "+
		"MCP endpoint (mcp-native - mcp-direct): p50 %.3f ms %s, p99 %.3f ms\n",
		r.MCPAdded.Rate, r.MCPAdded.P50, r.MCPAdded.P99, r.MCPNativeAdded.P50, bar(r.MCPNativeAdded.P50 <= 0.5, "≤ 0.5 ms"), r.MCPNativeAdded.P99)
	fmt.Fprintf(&b, "MCP endpoint with its go-sdk client's work included (mcp-native-sdk - mcp-direct): p50 %.3f ms, p99 %.3f ms\n",
		r.MCPNativeSDKAdded.P50, r.MCPNativeSDKAdded.P99)
	fmt.Fprintf(&b, "MCP 2026-07-28 added latency at %.0f calls/s (mcp-stateless - mcp-stateless-direct): p50 %.3f ms %s, p99 %.3f ms\n",
		r.MCPStatelessAdded.Rate, r.MCPStatelessAdded.P50, bar(r.MCPStatelessAdded.P50 <= 0.3, "≤ 0.3 ms"), r.MCPStatelessAdded.P99)
	feed, calm := r.find(TargetFeed, ModeMax), r.find(TargetFeed, ModeRate)
	fmt.Fprintf(&b, "feed: %d approved claims, %d per page: p50 %.3f ms/page at %.0f pages/s, %.3f ms/page at max (%d readers, %.0f claims/s)\n",
		r.Settings.FeedClaims, r.Settings.FeedPage, calm.P50, calm.Rate, feed.P50, r.Settings.Workers, r.FeedClaimsPerSecond)
	var out strings.Builder
	for line := range strings.Lines(b.String()) {
		out.WriteString(strings.TrimRight(line, " \n") + "\n")
	}
	_, err := io.WriteString(w, out.String())
	return err
}

func cpuList(cpus []int) string {
	if cpus == nil {
		return "not known"
	}
	return strings.Trim(fmt.Sprint(cpus), "[]")
}
