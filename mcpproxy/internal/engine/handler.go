package engine

import (
	"net/http"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/mcpevent"
)

// Authenticated returns the request's caller; on failure it has written
// the answer.
func (p *Engine) Authenticated(w http.ResponseWriter, r *http.Request) (mcpevent.Caller, bool) {
	if p.caller == nil || p.sources == nil {
		apierror.Write(w, r, apierror.Coded(errcode.AuthForbidden, "mcpproxy: handler is not configured with a caller and a connection source"))
		return mcpevent.Caller{}, false
	}
	caller, err := p.caller(r)
	if err != nil {
		ae := apierror.Coded(errcode.AuthForbidden, "mcpproxy: caller not authenticated")
		if code, ok := errcode.Of(err); ok {
			ae = apierror.Coded(code, err.Error())
		}
		apierror.Write(w, r, ae)
		return mcpevent.Caller{}, false
	}
	return caller, true
}

// Connection resolves the request's connection; on failure it has written
// the answer.
func (p *Engine) Connection(w http.ResponseWriter, r *http.Request) (*Connection, bool) {
	conn, err := p.sources.MCPConnection(r.Context(), r.PathValue("connection_id"))
	if err != nil {
		apierror.Write(w, r, ToAPIError(err))
		return nil, false
	}
	return conn, true
}
