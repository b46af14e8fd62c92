package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy/internal/hold"
	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Probe tests conn for the admin test route: a new MCP session
// (initialize, with the credential), tools/list to its last page, the
// session closed; apart from the shared session, the discovery cache
// and the circuit breaker, since the owner asks whether the server works
// now. A failure is an *UpstreamError saying which step failed and how
// (the HTTP status when one came), scrubbed, with what was learned.
func (p *Engine) Probe(ctx context.Context, conn *Connection) (res mcpevent.Handshake, err error) {
	st, err := p.State(conn)
	if err != nil {
		return mcpevent.Handshake{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	step, tr := "initialize", (*upstream.Trace)(nil)
	defer func() {
		if err != nil {
			_, res.Status = tr.Snapshot()
			msg := step + ": " + st.Scrubber.Load().Scrub(err.Error())
			if res.Status >= 400 {
				msg = fmt.Sprintf("%s: the MCP endpoint answered HTTP %d %s", step, res.Status, http.StatusText(res.Status))
			}
			p.Log.WarnContext(ctx, "mcpproxy: MCP connection test failed", "connection_id", st.ID, "error", msg)
			err = &UpstreamError{ConnectionID: st.ID, Message: msg}
		}
	}()
	// The probe's session is held to the bounds of any other, and what
	// its server makes it hold ends with it.
	held := hold.NewSession(hold.NewGate(hold.PerSession, st.Asking, func() { p.Refused(st) }), min(hold.ReplyTimeout, p.timeout))
	defer held.End()
	hc := &http.Client{Transport: held.Transport(st.HTTPClient.Transport), CheckRedirect: st.HTTPClient.CheckRedirect}
	endpoint := st.CurrentEndpoint()
	cs, tr, err := p.connectEra(ctx, st, hc, endpoint, p.client, "", false)
	if err != nil {
		return res, err
	}
	defer p.closeSession(cs)
	sc := st.Scrubber.Load()
	if init := cs.InitializeResult(); init != nil && init.ServerInfo != nil {
		res.ServerName, res.ServerVersion, res.ProtocolVersion = sc.Replace(init.ServerInfo.Name), sc.Replace(init.ServerInfo.Version), sc.Replace(init.ProtocolVersion)
	}
	step = "tools/list"
	var tctx context.Context
	tctx, tr = upstream.WithTrace(ctx)
	params := &mcp.ListToolsParams{}
	for range MaxToolPages {
		page, err := cs.ListTools(tctx, params)
		if err != nil {
			return res, err
		}
		res.Tools += len(page.Tools)
		if page.NextCursor == "" {
			_, res.Status = tr.Snapshot()
			return res, nil
		}
		params = &mcp.ListToolsParams{Cursor: page.NextCursor}
	}
	return res, errors.New("pagination did not end")
}
