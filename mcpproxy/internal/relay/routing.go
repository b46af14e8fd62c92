package relay

import (
	"encoding/json"
	"net/http"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Signed routing: the stateless revision names a request's method and
// target in the Mcp-Method and Mcp-Name headers, so that what routes it
// need not read the body. An agent may cover them with its signature; the
// gateway holds them to the body, so a signature over the headers binds
// the tool that is called.

// routedByName are the methods whose Mcp-Name names their target: their
// params' name, or uri for resources/read.
var routedByName = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// refuseRouting answers a POST whose routing headers do not match its
// body, and reports whether it did: 400 with the JSON envelope, or for a
// request of the stateless revision the JSON-RPC error that revision
// defines (HeaderMismatch), its data carrying the same code.
func refuseRouting(w http.ResponseWriter, r *http.Request, body []byte, env wire.Envelope) bool {
	refusal := checkRouting(r.Header, env)
	if refusal == nil {
		return false
	}
	if _, ok := stateless(r, env); !ok {
		apierror.Write(w, r, refusal)
		return true
	}
	var msg struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(body, &msg)
	je := wire.RPCError(refusal, apierror.RequestIDFrom(r.Context()))
	je.Code = mcp.CodeHeaderMismatch
	wire.Write(w, http.StatusBadRequest, wire.Response{ID: msg.ID, Error: je})
	return true
}

// checkRouting refuses a message whose Mcp-Method or Mcp-Name header does
// not match its envelope; a message without either header passes.
func checkRouting(h http.Header, msg wire.Envelope) *apierror.Error {
	method, hasMethod := headerValue(h, "Mcp-Method")
	name, hasName := headerValue(h, "Mcp-Name")
	if !hasMethod && !hasName {
		return nil
	}
	if !msg.One {
		return mismatch("the body is not one JSON-RPC message, which the headers would name")
	}
	if hasMethod && method != msg.Method {
		return mismatch("the Mcp-Method header names " + quote(method) + ", the message is " + quote(msg.Method))
	}
	target := msg.Name
	if msg.Method == "resources/read" || target == "" && !routedByName[msg.Method] {
		// resources/subscribe and the like name their target by uri.
		target = msg.URI
	}
	if !routedByName[msg.Method] {
		if hasName && name != target {
			return mismatch("the Mcp-Name header names " + quote(name) + ", the message " + quote(target))
		}
		return nil
	}
	switch {
	case !hasName && hasMethod:
		return mismatch("the Mcp-Name header is missing; " + quote(msg.Method) + " needs it")
	case name != target:
		return mismatch("the Mcp-Name header names " + quote(name) + ", the message " + quote(target))
	}
	return nil
}

// routed reports whether h carries Mcp-Method or Mcp-Name, which the
// body must then match.
func routed(h http.Header) bool {
	return len(h.Values("Mcp-Method")) > 0 || len(h.Values("Mcp-Name")) > 0
}

// headerValue returns a header's only value; a repeated header counts as
// present with a value nothing matches.
func headerValue(h http.Header, name string) (string, bool) {
	vs := h.Values(name)
	switch len(vs) {
	case 0:
		return "", false
	case 1:
		return vs[0], true
	}
	return "\x00repeated", true
}

func mismatch(msg string) *apierror.Error {
	return apierror.Coded(errcode.MCPHeaderMismatch, "mcpproxy: "+msg)
}

// quote clips and quotes a caller's value for an error message.
func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}
