package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/idnhq/idn/identity"
)

// bench runs the phases against a started stack.
type bench struct {
	ctx      context.Context
	o        options
	st       *stack
	progress io.Writer
	report   *Report
	clients  []*http.Client
}

// member is one target of a group of compared targets.
type member struct {
	name string
	do   doFunc
	// sign prepares n freshly signed requests (own nonces) for the next
	// round; nil for targets that verify no signature.
	sign func(n int) error
	// ceiling bounds the target's req/s, for sizing its first signed
	// pool when no other member of its group has been measured yet.
	ceiling float64
}

// signed makes a member of t whose requests id signs, with extra headers
// (such as a service API key) covered by the signature.
func signed(name string, t *httpTarget, id *identity.Identity, extra http.Header) member {
	return member{name: name, do: t.do, sign: func(n int) error { return presign(t, id, n, extra) }}
}

func (b *bench) runAll() error {
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
	http3 := []member{{name: TargetUpstream, do: upstream.do}, signed(TargetBaseline, baseline, st.agent, nil), signed(TargetGateway, gateway, st.agent, nil)}
	maxes, err := b.group(ModeMax, 0, http3...)
	if err != nil {
		return err
	}
	upstreamMax := maxes[0].RPS
	if _, err := b.group(ModeRate, half(b.o.rate, maxes[2].RPS), http3...); err != nil {
		return err
	}

	// MCP: a direct go-sdk session against tool calls through the
	// gateway. Those go to its REST call route and to its MCP endpoint.
	// The endpoint gets pre-signed JSON-RPC requests on a session a go-sdk
	// client opened, and that client's own calls, signed as it sends.
	// The rate is half the slowest one's max.
	viaGateway := &httpTarget{client: b.newClient(), method: "POST", body: []byte(`{"text":"hello"}`),
		urls: []string{st.gateway + "/mcp/" + mcpConnection + "/tools/" + echoTool + "/call"}}
	if err := b.check(viaGateway, st.agent, nil, `"hello"`); err != nil {
		return fmt.Errorf("MCP through the gateway: %w", err)
	}
	viaEndpoint := &httpTarget{client: b.newClient(), method: "POST", urls: []string{st.gateway + "/mcp/" + mcpConnection},
		bodies: func(i int) []byte {
			return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"text":"hello"}}}`, i, echoTool)
		}}
	session := http.Header{
		"Mcp-Session-Id":       {st.nativeSession.ID()},
		"Mcp-Protocol-Version": {st.nativeSession.InitializeResult().ProtocolVersion},
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
	}
	if err := b.check(viaEndpoint, st.agent, session, `"hello"`); err != nil {
		return fmt.Errorf("MCP through the gateway's endpoint: %w", err)
	}
	sdkClient := mcpDirect{st.nativeSession}
	if err := sdkClient.do(b.ctx, 0); err != nil {
		return fmt.Errorf("MCP through the gateway's endpoint with a go-sdk client: %w", err)
	}
	mcp4 := []member{{name: TargetMCPDirect, do: mcpDirect{st.mcpSession}.do}, signed(TargetMCPGateway, viaGateway, st.agent, nil),
		signed(TargetMCPNative, viaEndpoint, st.agent, session), {name: TargetMCPNativeSDK, do: sdkClient.do}}
	if maxes, err = b.group(ModeMax, 0, mcp4...); err != nil {
		return err
	}
	if _, err := b.group(ModeRate, half(b.o.mcpRate, min(maxes[1].RPS, maxes[2].RPS, maxes[3].RPS)), mcp4...); err != nil {
		return err
	}

	// MCP 2026-07-28: tool calls with no session, straight to a stateless
	// server with its credential, and pre-signed through the gateway's
	// endpoint to the same server. The rate is half the slower one's max.
	statelessCall := func(i int) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"text":"hello"},`+
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, i, echoTool)
	}
	stateless := http.Header{
		"Mcp-Protocol-Version": {"2026-07-28"},
		"Mcp-Method":           {"tools/call"},
		"Mcp-Name":             {echoTool},
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
	}
	statelessDirect := &httpTarget{client: b.newClient(), method: "POST", urls: []string{st.statelessServer}, bodies: statelessCall, header: stateless.Clone()}
	statelessDirect.header.Set("Authorization", "Bearer "+upstreamToken)
	viaStateless := &httpTarget{client: b.newClient(), method: "POST", urls: []string{st.gateway + "/mcp/" + statelessConnection}, bodies: statelessCall}
	if err := b.check(viaStateless, st.agent, stateless, `"hello"`); err != nil {
		return fmt.Errorf("MCP 2026-07-28 through the gateway's endpoint: %w", err)
	}
	mcp2 := []member{{name: TargetMCPStatelessDirect, do: statelessDirect.do}, signed(TargetMCPStateless, viaStateless, st.agent, stateless)}
	if maxes, err = b.group(ModeMax, 0, mcp2...); err != nil {
		return err
	}
	if _, err := b.group(ModeRate, half(b.o.mcpRate, maxes[1].RPS), mcp2...); err != nil {
		return err
	}

	// The control plane's feed, page by page, as a gateway reads it.
	feed := &httpTarget{client: b.newClient(), method: "GET"}
	for off := 0; off < b.o.claims; off += b.o.page {
		feed.urls = append(feed.urls, fmt.Sprintf("%s/v1/namespaces/claims?service=%s&limit=%d&offset=%d",
			st.controlPlane, serviceSlug, b.o.page, off))
	}
	key := http.Header{"Authorization": {"Bearer " + st.serviceKey}}
	if err := b.check(feed, st.feedReader, key, fmt.Sprintf(`"total":%d`, b.o.claims)); err != nil {
		return fmt.Errorf("feed check: %w", err)
	}
	reader := signed(TargetFeed, feed, st.feedReader, key)
	// Pages come no faster than the bare upstream answers, nor faster than
	// 6 million claims a second (JSON alone costs more); if they do, the
	// report says the pool ran out.
	reader.ceiling = min(upstreamMax, 6e6/float64(b.o.page))
	if maxes, err = b.group(ModeMax, 0, reader); err != nil {
		return err
	}
	_, err = b.group(ModeRate, half(b.o.feedRate, maxes[0].RPS), reader)
	return err
}

// group measures the members in one mode (at rate, in rate mode). The
// duration is split into rounds that visit every member in turn, so that
// whatever else the machine does meanwhile weighs on each alike.
func (b *bench) group(mode string, rate float64, members ...member) ([]Result, error) {
	names := make([]string, len(members))
	for k, m := range members {
		names[k] = m.name
	}
	what := mode
	if mode == ModeRate {
		what = fmt.Sprintf("%s %.0f/s", mode, rate)
	}
	fmt.Fprintf(b.progress, "%s: %s, %d rounds\n", what, strings.Join(names, ", "), b.o.rounds)

	round := b.o.duration / time.Duration(b.o.rounds)
	samples := make([]sample, len(members))
	for range b.o.rounds {
		for k, m := range members {
			limit := 0
			if m.sign != nil {
				limit = scheduled(rate, round)
				if mode == ModeMax {
					limit = maxPool(samples[k], samples, m.ceiling, round)
				}
				if err := m.sign(limit); err != nil {
					return nil, fmt.Errorf("signing %s requests: %w", m.name, err)
				}
			}
			runtime.GC() // collect the previous round's garbage outside this one
			stop := b.profile(m.name, mode)
			var s sample
			if mode == ModeMax {
				s = closedLoop(b.ctx, m.do, b.o.workers, limit, round, b.cpu)
			} else {
				s = openLoop(b.ctx, m.do, b.o.workers, rate, round, b.cpu)
			}
			stop()
			samples[k].merge(s)
			if err := b.ctx.Err(); err != nil {
				return nil, err
			}
		}
	}

	out := make([]Result, len(members))
	for k, m := range members {
		r := samples[k].result(runtime.NumCPU())
		r.Target, r.Mode, r.Workers = m.name, mode, b.o.workers
		if mode == ModeRate {
			r.Rate = rate
		}
		fmt.Fprintf(b.progress, "  %-12s %8.0f req/s  p50 %.3f ms  p99 %.3f ms  CPU %3.0f%%  errors %d\n",
			r.Target, r.RPS, r.P50, r.P99, r.CPU, r.Errors)
		b.report.Results = append(b.report.Results, r)
		out[k] = r
	}
	return out, nil
}

// maxPool is how many requests to sign for a max-throughput round of
// length d. That is enough for twice the member's own rate in earlier
// rounds. It is also enough for the fastest rate measured in its group so
// far, with a margin: a proxy is not faster than what it proxies. With neither measured yet,
// ceiling bounds it, else 50,000/s. A pool that still runs out only ends
// the round early, and the report says so.
func maxPool(own sample, group []sample, ceiling float64, d time.Duration) int {
	rate := 2 * own.rps()
	for _, s := range group {
		rate = max(rate, 1.25*s.rps())
	}
	if rate == 0 {
		rate = ceiling
	}
	if rate == 0 {
		rate = 50_000
	}
	return min(int(rate*d.Seconds())+1000, 2_000_000)
}

// profile starts the -cpuprofile profile when this is the profiled phase,
// in the process that runs the target's server: the child for the
// proxies, this process otherwise. Only the phase's first round is
// profiled.
func (b *bench) profile(name, mode string) (stop func()) {
	if b.o.cpuProfile == "" || b.o.profilePhase != name+"/"+mode {
		return func() {}
	}
	path := b.o.cpuProfile
	b.o.cpuProfile = "" // one round only
	start := startProfile
	if name == TargetBaseline || name == TargetGateway || name == TargetMCPGateway || name == TargetMCPNative || name == TargetMCPNativeSDK || name == TargetMCPStateless {
		start = b.st.proxies.profile
	}
	stop, err := start(path)
	if err != nil {
		fmt.Fprintln(b.progress, "no CPU profile:", err)
		return func() {}
	}
	return stop
}

// cpu is the CPU time both processes have used.
func (b *bench) cpu() time.Duration { return processCPU() + b.st.proxies.cpu() }

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

// check sends one signed request to t and requires a 200 whose body
// contains want, before anything is timed.
func (b *bench) check(t *httpTarget, signer *identity.Identity, extra http.Header, want string) error {
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
// so a target that verifies nothing receives requests of the same size as
// the gateway does.
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

// half is the fixed rate: the flag when set, else half the measured max.
func half(flagRate, maxRPS float64) float64 {
	if flagRate > 0 {
		return flagRate
	}
	return max(1, math.Round(maxRPS/2))
}
