package pairing

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/internal/pairwire"
)

// request is a JSON-RPC 2.0 request as it arrives.
type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

func errorResponse(id json.RawMessage, code int, msg string, data any) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(response{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: msg, Data: data}})
	return b
}

// plaintextRefused is the data of the error that refuses a secret sent in
// clear.
var plaintextRefused = map[string]errcode.Code{"code": errcode.PlaintextSecretRefused}

// handle answers one message of the control plane.
func (c *Client) handle(ctx context.Context, gatewayID string, msg []byte) []byte {
	if len(msg) > pairwire.MaxMessageBytes {
		var probe struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal(msg, &probe)
		return errorResponse(probe.ID, pairwire.CodeInvalidRequest, "message too large", nil)
	}
	var req request
	if err := json.Unmarshal(msg, &req); err != nil {
		return errorResponse(nil, pairwire.CodeParseError, "message is not JSON", nil)
	}
	if req.JSONRPC != "2.0" || req.Method == "" || len(req.ID) == 0 {
		return errorResponse(req.ID, pairwire.CodeInvalidRequest, "not a JSON-RPC 2.0 request", nil)
	}
	var params map[string]json.RawMessage
	if len(req.Params) > 0 && string(req.Params) != "null" {
		if err := json.Unmarshal(req.Params, &params); err != nil {
			return errorResponse(req.ID, pairwire.CodeInvalidParams, "params must be an object", nil)
		}
	}
	if params == nil {
		params = map[string]json.RawMessage{}
	}
	call, e := c.adminCall(gatewayID, req.Method, params)
	if e != nil {
		return errorResponse(req.ID, e.Code, e.Message, e.Data)
	}
	return c.run(ctx, req.ID, call)
}

// adminCall is one admin API request.
type adminCall struct {
	method, path string
	query        url.Values
	body         map[string]json.RawMessage // nil: no body
}

// adminCall translates an RPC into the admin request that serves it,
// opening sealed secrets on the way.
func (c *Client) adminCall(gatewayID, method string, p map[string]json.RawMessage) (adminCall, *rpcError) {
	if !slices.Contains(pairwire.Methods, method) {
		return adminCall{}, &rpcError{Code: pairwire.CodeMethodNotFound, Message: "unknown method"}
	}
	id, e := take(p, "id")
	switch method {
	case "connections.list":
		return adminCall{method: "GET", path: "/api/admin/connections"}, nil
	case "variables.list":
		return adminCall{method: "GET", path: "/api/admin/credential-variables"}, nil
	case "connections.create":
		if e := c.unseal(gatewayID, p, "secrets", ""); e != nil {
			return adminCall{}, e
		}
		if id != "" {
			p["id"], _ = json.Marshal(id)
		}
		return adminCall{method: "POST", path: "/api/admin/connections", body: p}, nil
	case "variables.set":
		key, e := take(p, "key")
		if e != nil || key == "" {
			return adminCall{}, invalidParams("key is required")
		}
		if e := c.unseal(gatewayID, p, "value", key); e != nil {
			return adminCall{}, e
		}
		p["key"], _ = json.Marshal(key)
		return adminCall{method: "POST", path: "/api/admin/credential-variables", body: p}, nil
	case "variables.delete":
		key, e := take(p, "key")
		if e != nil || key == "" {
			return adminCall{}, invalidParams("key is required")
		}
		q := url.Values{}
		if f, ok := p["force"]; ok {
			var force bool
			if json.Unmarshal(f, &force) != nil {
				return adminCall{}, invalidParams("force must be a boolean")
			}
			q.Set("force", map[bool]string{true: "true", false: "false"}[force])
		}
		return adminCall{method: "DELETE", path: "/api/admin/credential-variables/" + url.PathEscape(key), query: q}, nil
	}
	if e != nil || id == "" {
		return adminCall{}, invalidParams("id is required")
	}
	base := "/api/admin/connections/" + url.PathEscape(id)
	switch method {
	case "connections.get":
		return adminCall{method: "GET", path: base}, nil
	case "connections.delete":
		return adminCall{method: "DELETE", path: base}, nil
	case "connections.update":
		if _, ok := p["secrets"]; ok {
			return adminCall{}, &rpcError{Code: pairwire.CodeInvalidParams, Message: "secrets change through connections.rotate", Data: plaintextRefused}
		}
		return adminCall{method: "PATCH", path: base, body: p}, nil
	case "connections.test":
		if len(p) == 0 {
			return adminCall{method: "POST", path: base + "/test"}, nil
		}
		return adminCall{method: "POST", path: base + "/test", body: p}, nil
	case "connections.discover":
		refresh, e := take(p, "refresh")
		if e != nil || len(p) != 0 {
			return adminCall{}, invalidParams(`discover takes "id" and "refresh" only`)
		}
		q := url.Values{}
		if refresh != "" {
			q.Set("refresh", refresh)
		}
		return adminCall{method: "POST", path: base + "/discover", query: q}, nil
	case "connections.rotate":
		if e := c.unseal(gatewayID, p, "secrets", ""); e != nil {
			return adminCall{}, e
		}
		return adminCall{method: "POST", path: base + "/rotate", body: p}, nil
	}
	return adminCall{}, &rpcError{Code: pairwire.CodeInternalError, Message: "method not served"}
}

func invalidParams(msg string) *rpcError {
	return &rpcError{Code: pairwire.CodeInvalidParams, Message: msg}
}

// take removes a string param from p; absent gives "".
func take(p map[string]json.RawMessage, name string) (string, *rpcError) {
	raw, ok := p[name]
	if !ok {
		return "", nil
	}
	delete(p, name)
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", invalidParams(name + " must be a string")
	}
	return s, nil
}

// unseal replaces p's sealed_secrets with the admin body's secret field:
// field "secrets" gets the whole object; field "value" (a variable) gets
// the value of key, the object's only entry. A plaintext field is refused.
func (c *Client) unseal(gatewayID string, p map[string]json.RawMessage, field, key string) *rpcError {
	if _, ok := p[field]; ok {
		return &rpcError{Code: pairwire.CodeInvalidParams,
			Message: field + " in clear is refused over the relay: send sealed_secrets, sealed to the gateway's HPKE key", Data: plaintextRefused}
	}
	raw, ok := p["sealed_secrets"]
	if !ok {
		if field == "value" {
			return invalidParams("sealed_secrets is required")
		}
		return nil
	}
	delete(p, "sealed_secrets")
	var enc string
	if json.Unmarshal(raw, &enc) != nil {
		return invalidParams("sealed_secrets must be a base64url string")
	}
	sealed, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(enc, "="))
	if err != nil {
		return invalidParams("sealed_secrets must be base64url")
	}
	plain, err := c.opener.open(gatewayID, sealed)
	if err != nil {
		return invalidParams("sealed_secrets does not open with this gateway's key")
	}
	var secrets map[string]*string
	if err := json.Unmarshal(plain, &secrets); err != nil {
		return invalidParams("sealed_secrets must seal a JSON object of names to strings")
	}
	if field == "secrets" {
		p["secrets"] = plain
		return nil
	}
	v, ok := secrets[key]
	if !ok || len(secrets) != 1 || v == nil {
		return invalidParams("sealed_secrets of a variable must seal {\"" + key + "\": \"value\"}")
	}
	p["value"], _ = json.Marshal(*v)
	return nil
}

// run serves call on the admin API, as a loopback client, and turns the
// answer into the JSON-RPC response.
func (c *Client) run(ctx context.Context, id json.RawMessage, call adminCall) []byte {
	var body []byte
	if call.body != nil {
		body, _ = json.Marshal(call.body)
	}
	target := call.path
	if len(call.query) > 0 {
		target += "?" + call.query.Encode()
	}
	// Origin-form with Host localhost, as a local client sends it: an
	// absolute-form target that arrived on no listener would be refused.
	// The owner authenticated at the control plane with a passkey, so the
	// call may change where a secret is sent without the admin token.
	r := httptest.NewRequestWithContext(admin.OwnerContext(ctx), call.method, target, bytes.NewReader(body))
	r.Host, r.RemoteAddr = "localhost", "127.0.0.1:0"
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	c.cfg.Admin.ServeHTTP(w, r)
	res := w.Result()
	out := w.Body.Bytes()
	if res.StatusCode < 300 {
		if len(bytes.TrimSpace(out)) == 0 {
			out = []byte("null")
		}
		b, _ := json.Marshal(response{JSONRPC: "2.0", ID: id, Result: out})
		return b
	}
	var env struct {
		Code    string          `json:"code"`
		Error   string          `json:"error"`
		Details json.RawMessage `json:"details,omitempty"`
	}
	json.Unmarshal(out, &env)
	if env.Error == "" {
		env.Error = http.StatusText(res.StatusCode)
	}
	data := map[string]any{"status": res.StatusCode, "code": env.Code, "error": env.Error}
	if len(env.Details) > 0 {
		data["details"] = env.Details
	}
	return errorResponse(id, pairwire.CodeAPIError, env.Error, data)
}
