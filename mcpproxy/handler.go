package mcpproxy

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy/internal/engine"
)

// Handler returns the http.Handler of the MCP runtime routes:
//
//	GET  /mcp/{connection_id}/tools                 → ToolList
//	GET  /mcp/{connection_id}/tools/{tool}/explain  → Decision
//	POST /mcp/{connection_id}/tools/{tool}/call     → CallResult
//	POST, GET, DELETE /mcp/{connection_id}          → the MCP endpoint
//
// The first three take the query parameter refresh=auto (default) or
// force. The MCP endpoint speaks the MCP Streamable HTTP transport:
// initialize, ping, tools/list (filtered by the policy) and tools/call
// (checked as the call route checks, with progress and cancellation passed
// through), and resources and prompts when the connection exposes them;
// requests of the stateless revision (2026-07-28) need no session
// (package relay). A session belongs to the caller (namespace, key and subject) and the
// connection it was opened for: any other request naming its id is 404
// MCP_SESSION_NOT_FOUND. Sessions end after SessionIdleTimeout without a
// request; a caller opening one past its share (MaxSessionsPerKey,
// MaxSessionsPerNamespace, MaxSessions) evicts its own least recently used
// session, and a full pool answers 503 MCP_SESSIONS_EXHAUSTED only to a
// caller whose namespace holds none.
//
// Mount it at "/mcp/" behind the gateway's signed pipeline; it reads the
// caller with Config.Caller and the connection with Config.Connections.
// Every error outside an MCP session is the shared JSON envelope (see
// engine.ToAPIError).
func (p *Proxy) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		mux.Handle(method+" /mcp/{connection_id}", p.endpoint)
	}
	mux.HandleFunc("GET /mcp/{connection_id}/tools", p.serveTools)
	mux.HandleFunc("GET /mcp/{connection_id}/tools/{tool}/explain", p.serveExplain)
	mux.HandleFunc("POST /mcp/{connection_id}/tools/{tool}/call", p.serveCall)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apierror.Write(w, r, apierror.Coded(errcode.NotFound, "mcpproxy: no such MCP route"))
	})
	return mux
}

// begin authenticates the request and resolves its connection and refresh
// mode; on failure it has written the answer and returns ok=false.
func (p *Proxy) begin(w http.ResponseWriter, r *http.Request) (caller mcpevent.Caller, conn *Connection, refresh Refresh, ok bool) {
	if caller, ok = p.eng.Authenticated(w, r); !ok {
		return mcpevent.Caller{}, nil, "", false
	}
	refresh, err := ParseRefresh(r.URL.Query().Get("refresh"), RefreshAuto)
	if err != nil {
		apierror.Write(w, r, engine.ToAPIError(err))
		return mcpevent.Caller{}, nil, "", false
	}
	if conn, ok = p.eng.Connection(w, r); !ok {
		return mcpevent.Caller{}, nil, "", false
	}
	return caller, conn, refresh, true
}

func (p *Proxy) serveTools(w http.ResponseWriter, r *http.Request) {
	caller, conn, refresh, ok := p.begin(w, r)
	if !ok {
		return
	}
	list, err := p.eng.Tools(r.Context(), conn, caller.Subject, refresh)
	p.eng.Decide(r.Context(), conn, caller, "tools/list", "", engine.Outcome(err), err)
	p.reply(w, r, list, err)
}

func (p *Proxy) serveExplain(w http.ResponseWriter, r *http.Request) {
	caller, conn, refresh, ok := p.begin(w, r)
	if !ok {
		return
	}
	d, err := p.eng.Explain(r.Context(), conn, caller.Subject, r.PathValue("tool"), refresh)
	p.reply(w, r, d, err)
}

func (p *Proxy) serveCall(w http.ResponseWriter, r *http.Request) {
	caller, conn, refresh, ok := p.begin(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, p.eng.MaxBody()))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			apierror.Write(w, r, apierror.Coded(errcode.RequestBodyTooLarge, "mcpproxy: request body too large"))
			return
		}
		apierror.Write(w, r, apierror.Coded(errcode.ValidationError, "mcpproxy: reading request body failed"))
		return
	}
	res, err := p.eng.Call(r.Context(), conn, caller, r.PathValue("tool"), body, refresh)
	p.reply(w, r, res, err)
}

func (p *Proxy) reply(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		apierror.Write(w, r, engine.ToAPIError(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}
