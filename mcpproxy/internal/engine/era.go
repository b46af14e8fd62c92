package engine

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/idnhq/idn/mcpproxy/internal/clienttasks"
	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The upstream side speaks both eras. The first upstream session of a
// connection lets the SDK's client find the server's era: server/discover
// first, initialize when the server does not know it. What it finds is
// remembered per connection: a server that offers the stateless revision
// is spoken to statelessly (the SDK's client holds no session upstream),
// one that does not keeps its pooled sessions. An agent session of an
// earlier revision still asks for its own version, so that it gets what
// it would get directly; a server that refuses it is known to speak only
// the stateless revision, and later sessions ask for that at once.

// gatewayInfo names the gateway's client to a stateless server.
var gatewayInfo = &mcp.Implementation{Name: "idn-gateway", Version: "1"}

// Stateless reports whether st's server is known to offer the stateless
// revision.
func (st *Conn) Stateless() bool { return st.era.stateless.Load() }

// EraKnown reports whether st's server has been found to speak either era.
func (st *Conn) EraKnown() bool { return st.era.stateless.Load() || st.era.sessions.Load() }

// era is what a connection's server was found to speak.
type era struct {
	stateless atomic.Bool // the server offers the stateless revision
	sessions  atomic.Bool // the server opened a session of an earlier one
	only      atomic.Bool // the server refused an earlier revision
}

// version is the protocol version a session of the connection asks for
// first, when it asks for none of its own: "" lets the SDK's client
// find the era.
func (e *era) version() string {
	switch {
	case e.stateless.Load():
		return wire.Revision
	case e.sessions.Load():
		return UpstreamProtocol
	}
	return ""
}

// versionFor is the version a session asking for protocol asks for: its
// own, unless the server is known to refuse it.
func (e *era) versionFor(protocol string) string {
	if protocol == "" {
		return e.version()
	}
	if protocol < wire.Revision && e.only.Load() {
		return wire.Revision
	}
	return protocol
}

// learn remembers what cs, a session asking for protocol, found. A
// handshake that asked for an earlier revision and ended in the
// stateless one means the server refused the earlier.
func (e *era) learn(asked string, cs *mcp.ClientSession) {
	got := cs.InitializeResult().ProtocolVersion
	switch {
	case got >= wire.Revision:
		e.stateless.Store(true)
		if asked != "" && asked < wire.Revision {
			e.only.Store(true)
		}
	case asked == "" || asked >= wire.Revision:
		// Asked for the newest and was given an earlier one.
		e.sessions.Store(true)
		e.stateless.Store(false)
		e.only.Store(false)
	default:
		// An earlier revision was served: the server is not of the
		// stateless one alone.
		e.only.Store(false)
	}
}

// forget forgets the era, for a connection whose endpoint moved.
func (e *era) forget() {
	e.stateless.Store(false)
	e.sessions.Store(false)
	e.only.Store(false)
}

// connectEra opens a session of client over hc at endpoint asking for
// protocol, or for the connection's era when protocol is "", and learns
// from it. A server that refuses the version asked for (a 400 during the
// handshake) gets a second handshake in which the SDK's client picks.
func (p *Engine) connectEra(ctx context.Context, st *Conn, hc *http.Client, endpoint string, client *mcp.Client, protocol string, events bool) (*mcp.ClientSession, *upstream.Trace, error) {
	asked := st.era.versionFor(protocol)
	tctx, tr := upstream.WithTrace(ctx)
	cs, err := p.connect(tctx, hc, endpoint, client, asked, events)
	if _, status := tr.Snapshot(); err != nil && status == http.StatusBadRequest && asked != "" {
		tctx, tr = upstream.WithTrace(ctx)
		cs, err = p.connect(tctx, hc, endpoint, client, "", events)
	}
	if err != nil {
		return nil, tr, err
	}
	st.era.learn(asked, cs)
	return cs, tr, nil
}

// statelessCall exchanges a tools/call with a server of the stateless
// revision (upstream.CallStateless): its questions reach the agent of
// relay as a session server's requests do, whatever the agent's revision.
func (p *Engine) statelessCall(ctx context.Context, st *Conn, params *mcp.CallToolParams, schema []byte, relay *CallRelay) (json.RawMessage, error) {
	id := "idn-" + strconv.FormatUint(p.callSeq.Add(1), 10)
	if relay != nil && relay.Progress != nil {
		params.SetProgressToken(id)
	}
	var caps any = struct{}{}
	var pass *upstream.Rounds
	if relay != nil && relay.Caps != nil {
		caps = relay.Caps
	}
	if relay != nil {
		pass = relay.Pass
	}
	s := upstream.Session{Client: st.HTTPClient, Endpoint: st.CurrentEndpoint, Protocol: wire.Revision, Meta: upstream.StatelessMeta(gatewayInfo, caps)}
	return upstream.CallStateless(ctx, s, id, params, schema, callHandler{st, relay, clienttasks.Upstream{Version: wire.Revision}}, pass, p.detach)
}
