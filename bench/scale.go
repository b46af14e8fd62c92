package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"
)

// scaleRow is what -scale measures at one core count.
type scaleRow struct {
	cores              int
	gateway, baseline  Result  // max mode
	gwCPU, baseCPU     float64 // the child's CPU µs per successful request
	rss                int64   // the child's resident set after the gateway's max phase
	rate               float64 // of the open-loop phase: half the gateway's max
	achieved           float64 // the gateway's successful requests per second in it
	addedP50, addedP99 float64 // gateway minus upstream at rate, ms
}

// scale measures the gateway and the baseline at 1, 2, 4, … cores up to
// the number of cpus, the CPUs this process could use at its start. For each count K it starts the child
// process again with GOMAXPROCS=K, pinned to the last K CPUs while K is
// smaller than their number, with this process (load generator, upstream,
// control plane) on the others; at K equal to their number nothing is
// pinned and both share every CPU. It runs each proxy at its maximum rate
// in a closed loop, then the upstream and the gateway in an open loop at
// half the gateway's maximum, and prints a row per count.
func (b *bench) scale(stdout io.Writer, dir string, cpus []int) error {
	if len(cpus) == 0 {
		for c := range runtime.NumCPU() {
			cpus = append(cpus, c)
		}
	}
	st := b.st
	const path = "/v1/items/42"
	var rows []scaleRow
	for k := 1; k <= len(cpus); k *= 2 {
		child, parent := cpus[len(cpus)-k:], cpus[:len(cpus)-k]
		if k == len(cpus) {
			parent = cpus
		}
		fmt.Fprintf(b.progress, "scale: gateway and baseline on %d core(s) %v, GOMAXPROCS %d; load on %v\n", k, child, k, parent)
		kdir := filepath.Join(dir, "scale-"+strconv.Itoa(k))
		if err := os.Mkdir(kdir, 0o700); err != nil {
			return err
		}
		st.proxies.close()
		p, err := startProxies(b.ctx, proxyConfig{Upstream: st.upstream, MCPServer: st.mcpServer, StatelessServer: st.statelessServer,
			ControlPlane: st.controlPlane, ServiceKey: st.serviceKey, Dir: kdir, Claims: b.o.claims}, b.progress,
			func(cmd *exec.Cmd) error { return startPinned(cmd, child, parent, k) })
		if err != nil {
			return fmt.Errorf("gateway and baseline on %d cores: %w", k, err)
		}
		st.proxies, st.gateway, st.baseline = p, p.Gateway, p.Baseline
		st.stops = append(st.stops, p.close)
		b.closeIdle()

		upstream := &httpTarget{client: b.newClient(), method: "GET", urls: []string{st.upstream + path}}
		baseline := &httpTarget{client: b.newClient(), method: "GET", urls: []string{st.baseline + path}}
		gateway := &httpTarget{client: b.newClient(), method: "GET", urls: []string{st.gateway + "/proxy/" + httpConnection + path}}
		if err := b.check(gateway, st.agent, nil, `"credential":true`); err != nil {
			return fmt.Errorf("gateway check: %w", err)
		}
		row := scaleRow{cores: k}
		for _, t := range []struct {
			m   member
			res *Result
			cpu *float64
		}{
			{signed(TargetBaseline, baseline, st.agent, nil), &row.baseline, &row.baseCPU},
			{signed(TargetGateway, gateway, st.agent, nil), &row.gateway, &row.gwCPU},
		} {
			before := p.cpu()
			res, err := b.group(ModeMax, 0, t.m)
			if err != nil {
				return err
			}
			used := p.cpu() - before
			*t.res = res[0]
			if ok := res[0].Requests - res[0].Errors; ok > 0 {
				*t.cpu = float64(used.Microseconds()) / float64(ok)
			}
		}
		row.rss, _ = p.mem()
		row.rate = half(b.o.rate, row.gateway.RPS)
		res, err := b.group(ModeRate, row.rate, member{name: TargetUpstream, do: upstream.do}, signed(TargetGateway, gateway, st.agent, nil))
		if err != nil {
			return err
		}
		row.addedP50, row.addedP99 = res[1].P50-res[0].P50, res[1].P99-res[0].P99
		row.achieved = res[1].RPS
		rows = append(rows, row)
	}
	writeScale(stdout, b.report.Machine, b.o, rows)
	if n := b.report.errorCount(); n > 0 {
		return fmt.Errorf("%d requests failed", n)
	}
	return nil
}

func writeScale(w io.Writer, m Machine, o options, rows []scaleRow) {
	fmt.Fprintf(w, "idn bench scale: %d CPUs (%s), %s, %s\n", m.CPUs, m.CPUModel, m.GoVersion, time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "gateway and baseline in a child process with GOMAXPROCS = cores, pinned to that many CPUs while fewer than all;\n"+
		"load generator, upstream and control plane on the other CPUs (on all of them at the last count). Phases of %s in %d rounds, %d workers.\n"+
		"CPU µs/req and RSS are the child process's (RSS after the gateway's max phase; the idle baseline shares it); added latency is gateway minus upstream\n"+
		"at half the gateway's max (open loop, rate/s), of which the gateway answered gw got/s: below rate/s, it fell behind and its queue is in the latency.\n\n",
		o.duration, o.rounds, o.workers)
	fmt.Fprintf(w, "%5s %10s %10s %6s %10s %12s %8s %8s %8s %8s %8s\n", "cores", "gw req/s", "base req/s", "gw/bl",
		"gw µs/req", "base µs/req", "RSS MiB", "rate/s", "gw got/s", "+p50 ms", "+p99 ms")
	for _, r := range rows {
		ratio := 0.0
		if r.baseline.RPS > 0 {
			ratio = r.gateway.RPS / r.baseline.RPS
		}
		fmt.Fprintf(w, "%5d %10.0f %10.0f %6.2f %10.1f %12.1f %8.1f %8.0f %8.0f %8.3f %8.3f\n", r.cores, r.gateway.RPS, r.baseline.RPS, ratio,
			r.gwCPU, r.baseCPU, float64(r.rss)/(1<<20), r.rate, r.achieved, r.addedP50, r.addedP99)
	}
	if len(rows) > 1 && rows[0].gateway.RPS > 0 {
		last := rows[len(rows)-1]
		fmt.Fprintf(w, "\nscaling efficiency at %d cores: %.0f %% (gateway req/s over %d × its 1-core req/s)\n",
			last.cores, 100*last.gateway.RPS/(float64(last.cores)*rows[0].gateway.RPS), last.cores)
	}
}
