package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idnhq/idn/internal/tracing"
	"github.com/idnhq/idn/mcpproxy/internal/arguments"
	"github.com/idnhq/idn/mcpproxy/internal/metrics"
	"github.com/idnhq/idn/mcpproxy/internal/scrub"
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

// Tool is one discovered tool.
type Tool struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// InputSchema is the tool's JSON Schema for its arguments, a JSON object.
	InputSchema json.RawMessage `json:"input_schema"`
	// Annotations are the server's hints; nil when it gave none.
	Annotations *ToolAnnotations `json:"annotations,omitempty"`
}

// ToolAnnotations are a tool's hints as its server declared them (MCP's
// ToolAnnotations; an absent destructive or open-world hint is nil, which
// MCP reads as true): its word, which the tool policy never reads.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    bool   `json:"read_only_hint"`
	DestructiveHint *bool  `json:"destructive_hint,omitempty"`
	IdempotentHint  bool   `json:"idempotent_hint"`
	OpenWorldHint   *bool  `json:"open_world_hint,omitempty"`
}

// toolOf is the discovered form of a tool an upstream server listed.
func toolOf(t *mcp.Tool) Tool {
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || len(schema) == 0 || schema[0] != '{' {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	tool := Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: schema}
	if a := t.Annotations; a != nil {
		tool.Annotations = &ToolAnnotations{Title: a.Title, ReadOnlyHint: a.ReadOnlyHint, DestructiveHint: a.DestructiveHint,
			IdempotentHint: a.IdempotentHint, OpenWorldHint: a.OpenWorldHint}
	}
	return tool
}

// Discovery is the result of tool discovery for one connection: the
// connection's mcp_discovery object. The gateway stores it as opaque JSON
// (Config.OnDiscovery) and hands it back in Connection.Discovery to seed the
// cache after a restart.
type Discovery struct {
	ServerName      string `json:"server_name,omitempty"`
	ServerVersion   string `json:"server_version,omitempty"`
	ProtocolVersion string `json:"protocol_version,omitempty"`
	Tools           []Tool `json:"tools"`
	// DiscoveredAt is the time of the last successful discovery; zero when
	// discovery never succeeded.
	DiscoveredAt time.Time `json:"discovered_at,omitzero"`
	// LastError is the last failed discovery's error, scrubbed of secrets;
	// empty when the last attempt succeeded.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// snapshot is an immutable cached Discovery with lookup tables and lazily
// compiled argument schemas.
type snapshot struct {
	d       Discovery
	names   []string
	byName  map[string]int
	schemas sync.Map // tool name → *arguments.Schema or error
}

func newSnapshot(d Discovery) *snapshot {
	slices.SortFunc(d.Tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	s := &snapshot{d: d, byName: make(map[string]int, len(d.Tools))}
	for i, t := range d.Tools {
		s.names = append(s.names, t.Name)
		s.byName[t.Name] = i
	}
	return s
}

func (s *snapshot) succeeded() bool { return s != nil && !s.d.DiscoveredAt.IsZero() }

func (s *snapshot) schema(tool string) (*arguments.Schema, error) {
	if v, ok := s.schemas.Load(tool); ok {
		if ts, ok := v.(*arguments.Schema); ok {
			return ts, nil
		}
		return nil, v.(error)
	}
	ts, err := arguments.Compile(s.d.Tools[s.byName[tool]].InputSchema)
	if err != nil {
		s.schemas.Store(tool, err)
		return nil, err
	}
	s.schemas.Store(tool, ts)
	return ts, nil
}

// flight is one upstream discovery that concurrent requests share.
type flight struct {
	done   chan struct{}
	origin oteltrace.SpanContext // of the request that started the flight
	snap   *snapshot
	err    error
}

// discover returns the connection's discovery per its cache state: fresh
// (age ≤ TTL) is served as is; stale (≤ TTL +
// stale-if-error) is refreshed, falling back to the cached result on error;
// expired or absent must be refreshed. RefreshForce always refreshes and
// never falls back. Concurrent refreshes of one connection share a single
// upstream discovery.
func (p *Proxy) discover(ctx context.Context, st *connState, refresh Refresh) (*snapshot, error) {
	now := p.now()
	st.mu.Lock()
	cached := st.snap
	if refresh != RefreshForce && cached.succeeded() && now.Sub(cached.d.DiscoveredAt) <= p.ttl {
		st.mu.Unlock()
		p.metrics.Discovery.WithLabelValues(metrics.DiscoveryCacheHit).Inc()
		return cached, nil
	}
	f := st.flight
	if f == nil {
		f = &flight{done: make(chan struct{}), origin: oteltrace.SpanContextFromContext(ctx)}
		st.flight = f
		go p.runDiscovery(st, f)
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
	if refresh != RefreshForce && cached.succeeded() && now.Sub(cached.d.DiscoveredAt) <= p.ttl+p.staleIfError {
		p.metrics.Discovery.WithLabelValues(metrics.DiscoveryStaleIfError).Inc()
		p.log.Warn("mcpproxy: serving stale discovery", "connection_id", st.id, "error", f.err.Error())
		return cached, nil
	}
	return nil, f.err
}

// runDiscovery performs one upstream discovery for a flight, updates the
// cache and hands the result to Config.OnDiscovery before releasing waiters.
func (p *Proxy) runDiscovery(st *connState, f *flight) {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	ctx, span := p.tracer.Start(oteltrace.ContextWithSpanContext(ctx, f.origin), "mcp.discovery", oteltrace.SpanKindInternal)
	defer span.End()
	d, err := p.fetchDiscovery(ctx, st)
	if span.IsRecording() {
		span.SetAttributes(tracing.ConnectionID.String(st.id), attribute.Int("mcp.tools", len(d.Tools)))
		if err != nil {
			span.SetStatus(codes.Error, "")
		}
	}

	st.mu.Lock()
	if err == nil {
		st.snap = newSnapshot(d)
	} else {
		var prev Discovery
		if st.snap != nil {
			prev = st.snap.d
		}
		d = prev
		d.Tools = append([]Tool{}, prev.Tools...)
		d.LastError = err.Error()
		d.LastErrorAt = p.now().UTC()
		st.snap = newSnapshot(d)
	}
	f.snap, f.err = st.snap, err
	st.flight = nil
	st.mu.Unlock()

	switch {
	case err == nil:
		p.metrics.Discovery.WithLabelValues(metrics.DiscoverySuccess).Inc()
	case errors.Is(err, ErrCircuitOpen):
		p.metrics.Discovery.WithLabelValues(metrics.DiscoveryCircuitOpen).Inc()
	default:
		p.metrics.Discovery.WithLabelValues(metrics.DiscoveryError).Inc()
		p.log.Warn("mcpproxy: discovery failed", "connection_id", st.id, "error", err.Error())
	}
	if p.onDiscovery != nil {
		p.onDiscovery(ctx, st.id, d)
	}
	close(f.done)
}

// maxToolPages bounds tools/list pagination against a server that never
// stops returning cursors.
const maxToolPages = 100

func (p *Proxy) fetchDiscovery(ctx context.Context, st *connState) (Discovery, error) {
	var d Discovery
	err := p.guarded(ctx, st, nil, func(ctx context.Context, cs *mcp.ClientSession) error {
		d = Discovery{}
		if init := cs.InitializeResult(); init != nil {
			d.ProtocolVersion = init.ProtocolVersion
			if init.ServerInfo != nil {
				d.ServerName, d.ServerVersion = init.ServerInfo.Name, init.ServerInfo.Version
			}
		}
		params := &mcp.ListToolsParams{}
		for range maxToolPages {
			res, err := cs.ListTools(ctx, params)
			if err != nil {
				return err
			}
			for _, t := range res.Tools {
				d.Tools = append(d.Tools, toolOf(t))
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
	if err := cleanDiscovery(st.scrubber.Load(), &d); err != nil {
		return Discovery{}, &UpstreamError{ConnectionID: st.id, Message: "tools/list returned tools that cannot be checked for secrets"}
	}
	if d.Tools == nil {
		d.Tools = []Tool{}
	}
	d.DiscoveredAt = p.now().UTC()
	return d, nil
}

// cleanDiscovery replaces secrets in what the upstream said in a
// discovery (server name and version, protocol version, each tool's name,
// title, description, annotation title and input schema) and never in the gateway's own
// field names: laundering the Discovery's JSON form would also rewrite a
// key such as "tools", and a short secret would empty the catalogue.
func cleanDiscovery(sc *scrub.Scrubber, d *Discovery) error {
	for _, f := range []*string{&d.ServerName, &d.ServerVersion, &d.ProtocolVersion} {
		*f = sc.Replace(*f)
	}
	for i := range d.Tools {
		t := &d.Tools[i]
		t.Name, t.Title, t.Description = sc.Replace(t.Name), sc.Replace(t.Title), sc.Replace(t.Description)
		if t.Annotations != nil {
			t.Annotations.Title = sc.Replace(t.Annotations.Title)
		}
		schema, err := scrub.Launder(sc, &t.InputSchema) // a schema is upstream JSON throughout, keys included
		if err != nil {
			return err
		}
		t.InputSchema = *schema
	}
	return nil
}
