package mcpproxy

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/idnhq/idn/internal/apierror"
)

// Handler returns the http.Handler of the three MCP runtime routes:
//
//	GET  /mcp/{connection_id}/tools                 → ToolList
//	GET  /mcp/{connection_id}/tools/{tool}/explain  → Decision
//	POST /mcp/{connection_id}/tools/{tool}/call     → CallResult
//
// each with the query parameter refresh=auto (default) or force. Mount it
// at "/mcp/" behind the gateway's signed pipeline; it reads the caller with
// Config.Caller and the connection with Config.Connections. Every error is
// the shared JSON envelope (see toAPIError).
func (p *Proxy) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /mcp/{connection_id}/tools", p.serveTools)
	mux.HandleFunc("GET /mcp/{connection_id}/tools/{tool}/explain", p.serveExplain)
	mux.HandleFunc("POST /mcp/{connection_id}/tools/{tool}/call", p.serveCall)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apierror.Write(w, r, apierror.New(http.StatusNotFound, "NOT_FOUND", "mcpproxy: no such MCP route"))
	})
	return mux
}

// begin authenticates the request and resolves its connection and refresh
// mode; on failure it has written the answer and returns ok=false.
func (p *Proxy) begin(w http.ResponseWriter, r *http.Request) (caller Caller, conn *Connection, refresh Refresh, ok bool) {
	if p.caller == nil || p.sources == nil {
		apierror.Write(w, r, apierror.New(http.StatusForbidden, "AUTH_FORBIDDEN", "mcpproxy: handler is not configured with a caller and a connection source"))
		return Caller{}, nil, "", false
	}
	caller, err := p.caller(r)
	if err != nil {
		ae := apierror.New(http.StatusForbidden, "AUTH_FORBIDDEN", "mcpproxy: caller not authenticated")
		var he interface {
			StatusCode() int
			ErrorCode() string
		}
		if errors.As(err, &he) {
			ae = apierror.New(he.StatusCode(), he.ErrorCode(), err.Error())
		}
		apierror.Write(w, r, ae)
		return Caller{}, nil, "", false
	}
	refresh, err = ParseRefresh(r.URL.Query().Get("refresh"), RefreshAuto)
	if err != nil {
		apierror.Write(w, r, toAPIError(err))
		return Caller{}, nil, "", false
	}
	conn, err = p.sources.MCPConnection(r.Context(), r.PathValue("connection_id"))
	if err != nil {
		apierror.Write(w, r, toAPIError(err))
		return Caller{}, nil, "", false
	}
	return caller, conn, refresh, true
}

func (p *Proxy) serveTools(w http.ResponseWriter, r *http.Request) {
	caller, conn, refresh, ok := p.begin(w, r)
	if !ok {
		return
	}
	list, err := p.Tools(r.Context(), conn, caller.Subject, refresh)
	p.reply(w, r, list, err)
}

func (p *Proxy) serveExplain(w http.ResponseWriter, r *http.Request) {
	caller, conn, refresh, ok := p.begin(w, r)
	if !ok {
		return
	}
	d, err := p.Explain(r.Context(), conn, caller.Subject, r.PathValue("tool"), refresh)
	p.reply(w, r, d, err)
}

func (p *Proxy) serveCall(w http.ResponseWriter, r *http.Request) {
	caller, conn, refresh, ok := p.begin(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, p.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			apierror.Write(w, r, apierror.New(http.StatusRequestEntityTooLarge, "REQUEST_BODY_TOO_LARGE", "mcpproxy: request body too large"))
			return
		}
		apierror.Write(w, r, apierror.New(http.StatusBadRequest, "VALIDATION_ERROR", "mcpproxy: reading request body failed"))
		return
	}
	res, err := p.Call(r.Context(), conn, caller, r.PathValue("tool"), body, refresh)
	p.reply(w, r, res, err)
}

func (p *Proxy) reply(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		apierror.Write(w, r, toAPIError(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}
