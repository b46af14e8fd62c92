package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Probe is what a connection test learned from the upstream MCP server.
type Probe struct {
	// Server is the server's initialize answer: its name, version and the
	// protocol version the handshake settled on. Zero when initialize
	// failed.
	Server ServerInfo
	// Tools is the number of tools the server lists.
	Tools int
	// Status is the HTTP status of the server's last answer; 0 when none
	// came (the server could not be reached).
	Status int
}

// Probe tests conn as the admin test route does: a new MCP session with
// the upstream server (initialize, with the connection's credential),
// tools/list to its last page, and the session closed. It uses neither
// the shared session nor the discovery cache, and the circuit breaker
// neither refuses it nor counts it: the owner asks whether the server
// works now. A failure is an *UpstreamError whose message says what
// failed (the handshake or the listing, and the HTTP status when the
// server answered one), scrubbed of secrets; the Probe it returns with
// it holds what was learned before.
func (p *Proxy) Probe(ctx context.Context, conn *Connection) (Probe, error) {
	st, err := p.state(conn)
	if err != nil {
		return Probe{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var res Probe
	fail := func(step string, tr *upstream.Trace, err error) (Probe, error) {
		_, res.Status = tr.Snapshot()
		msg := step + ": " + st.scrubber.Load().Scrub(err.Error())
		if res.Status >= 400 {
			msg = fmt.Sprintf("%s: the MCP endpoint answered HTTP %d %s", step, res.Status, http.StatusText(res.Status))
		}
		p.log.WarnContext(ctx, "mcpproxy: MCP connection test failed", "connection_id", st.id, "error", msg)
		return res, &UpstreamError{ConnectionID: st.id, Message: msg}
	}
	endpoint := st.currentEndpoint()
	tctx, tr := upstream.WithTrace(ctx)
	cs, err := p.connect(tctx, st, endpoint, p.client, upstreamProtocol, false)
	if _, status := tr.Snapshot(); err != nil && status == http.StatusBadRequest {
		tctx, tr = upstream.WithTrace(ctx)
		cs, err = p.connect(tctx, st, endpoint, p.client, "", false)
	}
	if err != nil {
		return fail("initialize", tr, err)
	}
	defer p.closeSession(cs)
	if init := cs.InitializeResult(); init != nil {
		res.Server.ProtocolVersion = init.ProtocolVersion
		if init.ServerInfo != nil {
			res.Server.Name, res.Server.Version = init.ServerInfo.Name, init.ServerInfo.Version
		}
	}
	sc := st.scrubber.Load()
	res.Server = ServerInfo{Name: sc.Replace(res.Server.Name), Version: sc.Replace(res.Server.Version), ProtocolVersion: sc.Replace(res.Server.ProtocolVersion)}
	lctx, tr := upstream.WithTrace(ctx)
	params := &mcp.ListToolsParams{}
	for range maxToolPages {
		page, err := cs.ListTools(lctx, params)
		if err != nil {
			return fail("tools/list", tr, err)
		}
		res.Tools += len(page.Tools)
		if page.NextCursor == "" {
			_, res.Status = tr.Snapshot()
			return res, nil
		}
		params = &mcp.ListToolsParams{Cursor: page.NextCursor}
	}
	return fail("tools/list", tr, errors.New("pagination did not end"))
}
