package pairing

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/pairing/pairwire"
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
	result, e := c.call(admin.OwnerContext(ctx), gatewayID, req.Method, params)
	if e != nil {
		return errorResponse(req.ID, e.Code, e.Message, e.Data)
	}
	out, err := json.Marshal(result)
	if err != nil {
		c.log.Error("pairing: answer not encoded", "method", req.Method, "err", err)
		return errorResponse(req.ID, pairwire.CodeInternalError, "answer not encoded", nil)
	}
	b, _ := json.Marshal(response{JSONRPC: "2.0", ID: req.ID, Result: out})
	return b
}

// call runs one RPC on the admin API's operations, opening sealed secrets
// on the way. The context is the owner's (admin.OwnerContext).
func (c *Client) call(ctx context.Context, gatewayID, method string, p map[string]json.RawMessage) (any, *rpcError) {
	if !slices.Contains(pairwire.Methods, method) && method != pairwire.MethodOwnerKeysUpdate &&
		method != pairwire.MethodConnectStart && method != pairwire.MethodConnectFinish {
		return nil, &rpcError{Code: pairwire.CodeMethodNotFound, Message: "unknown method"}
	}
	a := c.cfg.Admin
	id, e := take(p, "id")
	switch method {
	case "connections.list":
		return a.ListConnections(), nil
	case "variables.list":
		return a.ListVariables(), nil
	case "connections.create":
		if e := c.unseal(gatewayID, p, "secrets", ""); e != nil {
			return nil, e
		}
		if id != "" {
			p["id"], _ = json.Marshal(id)
		}
		return c.done(a.CreateConnection(ctx, body(p)))
	case "variables.set":
		key, e := take(p, "key")
		if e != nil || key == "" {
			return nil, invalidParams("key is required")
		}
		if e := c.unseal(gatewayID, p, "value", key); e != nil {
			return nil, e
		}
		p["key"], _ = json.Marshal(key)
		v, _, err := a.PutVariable(ctx, body(p), "")
		return c.done(v, err)
	case pairwire.MethodOwnerKeysUpdate:
		return c.ownerKeysUpdate(gatewayID, p["update"])
	case "variables.delete":
		key, e := take(p, "key")
		if e != nil || key == "" {
			return nil, invalidParams("key is required")
		}
		var force bool
		if f, ok := p["force"]; ok && json.Unmarshal(f, &force) != nil {
			return nil, invalidParams("force must be a boolean")
		}
		return c.done(nil, a.DeleteVariable(ctx, key, force))
	}
	if e != nil || id == "" {
		return nil, invalidParams("id is required")
	}
	switch method {
	case "connections.get":
		return c.done(a.GetConnection(id))
	case "connections.delete":
		return c.done(nil, a.DeleteConnection(ctx, id))
	case "connections.update":
		if _, ok := p["secrets"]; ok {
			return nil, &rpcError{Code: pairwire.CodeInvalidParams, Message: "secrets change through connections.rotate", Data: plaintextRefused}
		}
		return c.done(a.UpdateConnection(ctx, id, body(p)))
	case "connections.test":
		var b []byte
		if len(p) > 0 {
			b = body(p)
		}
		return c.done(a.TestConnection(ctx, id, b))
	case "connections.discover":
		refresh, e := take(p, "refresh")
		if e != nil || len(p) != 0 {
			return nil, invalidParams(`discover takes "id" and "refresh" only`)
		}
		return c.done(a.DiscoverConnection(ctx, id, refresh))
	case "connections.tool_pins":
		if len(p) != 0 {
			return nil, invalidParams(`tool_pins takes "id" only`)
		}
		return c.done(a.ReviewToolPins(ctx, id))
	case "connections.accept_tools":
		return c.done(a.AcceptToolPins(ctx, id, body(p), "owner"))
	case "connections.reject_tools":
		return c.done(a.RejectToolPins(ctx, id, body(p), "owner"))
	case "connections.rotate":
		if e := c.unseal(gatewayID, p, "secrets", ""); e != nil {
			return nil, e
		}
		return c.done(a.RotateConnection(ctx, id, body(p), ""))
	case pairwire.MethodConnectStart, pairwire.MethodConnectFinish:
		return c.connectAccount(ctx, method, id, p)
	case "connections.disconnect_account":
		subject, e := take(p, "subject")
		if e != nil || len(p) != 0 {
			return nil, invalidParams(`disconnect_account takes "id" and "subject" only`)
		}
		return c.done(a.DisconnectAccount(ctx, id, subject))
	}
	return nil, &rpcError{Code: pairwire.CodeInternalError, Message: "method not served"}
}

// connectAccount runs a step of the dashboard's connect flow on Config.Connector.
func (c *Client) connectAccount(ctx context.Context, method, id string, p map[string]json.RawMessage) (any, *rpcError) {
	if c.cfg.Connector == nil {
		return nil, &rpcError{Code: pairwire.CodeMethodNotFound, Message: "this gateway connects no account from the dashboard"}
	}
	subject, e := take(p, "subject")
	if e != nil {
		return nil, e
	}
	if method == pairwire.MethodConnectStart {
		redirect, e := take(p, "redirect_uri")
		if e != nil || len(p) != 0 {
			return nil, invalidParams(`connect_start takes "id", "subject" and "redirect_uri" only`)
		}
		return c.done(c.cfg.Connector.Start(ctx, id, subject, redirect))
	}
	var q map[string]string
	if raw, ok := p["query"]; !ok || len(p) != 1 || json.Unmarshal(raw, &q) != nil {
		return nil, invalidParams(`connect_finish takes "id", "subject" and "query", an object of strings`)
	}
	query := url.Values{}
	for k, v := range q {
		query.Set(k, v)
	}
	return c.done(c.cfg.Connector.Finish(ctx, id, subject, query))
}

// body is the admin API's JSON body of an RPC's params.
func body(p map[string]json.RawMessage) []byte {
	b, _ := json.Marshal(p)
	return b
}

// done answers an operation's result, or its error as the admin API
// answers it over HTTP: status, code, message and details.
func (c *Client) done(result any, err error) (any, *rpcError) {
	if err == nil {
		return result, nil
	}
	code, msg, extra := admin.Problem(err)
	if code == errcode.InternalError {
		c.log.Error("pairing: RPC failed", "err", err)
	}
	data := map[string]any{"status": code.Status(), "code": code, "error": msg}
	if d, ok := extra["details"]; ok {
		data["details"] = d
	}
	return nil, &rpcError{Code: pairwire.CodeAPIError, Message: msg, Data: data}
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
