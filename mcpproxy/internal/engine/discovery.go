package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/idnhq/idn/mcpproxy/internal/catalog"

	"github.com/idnhq/idn/kit/textcap"
	"github.com/idnhq/idn/kit/tracing"
	"github.com/idnhq/idn/mcpproxy/internal/metrics"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// Refresh selects how a request uses the discovery cache (the refresh
// query parameter).
type Refresh string

const (
	// RefreshAuto serves a fresh cached result, refreshes a stale one
	// (falling back to it on error) and must refresh an expired one.
	RefreshAuto Refresh = "auto"
	// RefreshForce always asks the upstream server, and fails when it fails.
	RefreshForce Refresh = "force"
)

// ParseRefresh parses the refresh query parameter; "" means def.
func ParseRefresh(s string, def Refresh) (Refresh, error) {
	switch Refresh(s) {
	case "":
		return def, nil
	case RefreshAuto, RefreshForce:
		return Refresh(s), nil
	}
	return "", fmt.Errorf("%w: refresh must be auto or force", ErrBadRequest)
}

// flight is one upstream discovery that concurrent requests share.
type flight struct {
	done   chan struct{}
	origin oteltrace.SpanContext // of the request that started the flight
	snap   *catalog.Catalog
	err    error
}

// discover returns the connection's discovery per its cache state: fresh
// (age ≤ TTL) is served as is; stale (≤ TTL +
// stale-if-error) is refreshed, falling back to the cached result on error;
// expired or absent must be refreshed. RefreshForce always refreshes and
// never falls back. Concurrent refreshes of one connection share a single
// upstream discovery.
func (p *Engine) discover(ctx context.Context, st *Conn, refresh Refresh) (*catalog.Catalog, error) {
	now := p.now()
	st.mu.Lock()
	cached := st.snap
	if refresh != RefreshForce && cached.Succeeded() && now.Sub(cached.Discovery.DiscoveredAt) <= p.ttl {
		st.mu.Unlock()
		p.Metrics.Discovery.WithLabelValues(metrics.DiscoveryCacheHit).Inc()
		return cached, nil
	}
	f := st.flight
	if f == nil {
		f = &flight{done: make(chan struct{}), origin: oteltrace.SpanContextFromContext(ctx)}
		st.flight = f
		go p.runDiscovery(flightContext(ctx, st), st, f)
	}
	st.mu.Unlock()

	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("mcpproxy: waiting for discovery: %w", ctx.Err())
	}
	if f.err == nil {
		return f.snap, nil
	}
	if refresh != RefreshForce && cached.Succeeded() && now.Sub(cached.Discovery.DiscoveredAt) <= p.ttl+p.staleIfError {
		p.Metrics.Discovery.WithLabelValues(metrics.DiscoveryStaleIfError).Inc()
		p.Log.Warn("mcpproxy: serving stale discovery", "connection_id", st.ID, "error", f.err.Error())
		return cached, nil
	}
	return nil, f.err
}

// runDiscovery performs one upstream discovery for a flight, updates the
// cache and hands the result to Config.OnDiscovery before releasing waiters.
func (p *Engine) runDiscovery(base context.Context, st *Conn, f *flight) {
	ctx, cancel := context.WithTimeout(base, p.timeout)
	defer cancel()
	ctx, span := p.tracer.Start(oteltrace.ContextWithSpanContext(ctx, f.origin), "mcp.discovery", oteltrace.SpanKindInternal)
	defer span.End()
	d, err := p.fetchDiscovery(ctx, st)
	if span.IsRecording() {
		span.SetAttributes(tracing.ConnectionID.String(st.ID), attribute.Int("mcp.tools", len(d.Tools)))
		if err != nil {
			span.SetStatus(codes.Error, "")
		}
	}

	st.mu.Lock()
	if err == nil {
		st.snap = catalog.New(d)
	} else {
		var prev Discovery
		if st.snap != nil {
			prev = st.snap.Discovery
		}
		d = prev
		d.Tools = append([]Tool{}, prev.Tools...)
		d.LastError = textcap.Clip(err.Error(), textcap.Text) // stored: the upstream wrote part of it
		d.LastErrorAt = p.now().UTC()
		st.snap = catalog.New(d)
	}
	f.snap, f.err = st.snap, err
	st.flight = nil
	st.mu.Unlock()
	if err == nil {
		p.Pins.Observe(ctx, st.ID, f.snap, true)
	}

	switch {
	case err == nil:
		p.Metrics.Discovery.WithLabelValues(metrics.DiscoverySuccess).Inc()
	case errors.Is(err, ErrCircuitOpen):
		p.Metrics.Discovery.WithLabelValues(metrics.DiscoveryCircuitOpen).Inc()
	default:
		p.Metrics.Discovery.WithLabelValues(metrics.DiscoveryError).Inc()
		p.Log.Warn("mcpproxy: discovery failed", "connection_id", st.ID, "error", err.Error())
	}
	if p.onDiscovery != nil {
		p.onDiscovery(ctx, st.ID, d)
	}
	close(f.done)
}

// MaxToolPages bounds tools/list pagination against a server that never
// stops returning cursors.
const MaxToolPages = 100

func (p *Engine) fetchDiscovery(ctx context.Context, st *Conn) (Discovery, error) {
	var d Discovery
	err := p.Guarded(ctx, st, nil, func(ctx context.Context, cs *mcp.ClientSession) error {
		d = Discovery{}
		if init := cs.InitializeResult(); init != nil {
			d.ProtocolVersion = init.ProtocolVersion
			if init.ServerInfo != nil {
				d.ServerName, d.ServerVersion = init.ServerInfo.Name, init.ServerInfo.Version
			}
		}
		params := &mcp.ListToolsParams{}
		for range MaxToolPages {
			res, err := cs.ListTools(ctx, params)
			if err != nil {
				return err
			}
			for _, t := range res.Tools {
				d.Tools = append(d.Tools, catalog.ToolOf(t))
			}
			if res.NextCursor == "" {
				return nil
			}
			params = &mcp.ListToolsParams{Cursor: res.NextCursor}
		}
		return errors.New("mcpproxy: tools/list pagination did not end")
	})
	if err != nil {
		return Discovery{}, err
	}
	if err := catalog.Clean(st.Scrubber.Load(), &d); err != nil {
		return Discovery{}, &UpstreamError{ConnectionID: st.ID, Message: "tools/list returned tools that cannot be checked for secrets"}
	}
	if d.Tools == nil {
		d.Tools = []Tool{}
	}
	d.DiscoveredAt = p.now().UTC()
	return d, nil
}
