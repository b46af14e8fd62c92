// Package wire holds the JSON-RPC messages the MCP endpoint's fast paths
// read and write without the SDK: the agent's calls the endpoint answers
// itself (Classify, PlainPOST), and an upstream's answer to a tools/call,
// one JSON body or an event stream (EventReader, CallResult).
package wire

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/idnhq/idn/apierror"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Request is an outgoing JSON-RPC request or, without ID, notification.
type Request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      any    `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// Incoming is any JSON-RPC message an upstream sends.
type Incoming struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

// Response is a JSON-RPC response with exactly one of Result and Error.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *jsonrpc.Error  `json:"error,omitempty"`
}

// Write writes res as the application/json answer to a POST.
func Write(w http.ResponseWriter, status int, res Response) {
	res.JSONRPC = "2.0"
	raw, err := json.Marshal(res)
	if err != nil {
		status = http.StatusOK
		raw, _ = json.Marshal(Response{JSONRPC: "2.0", ID: res.ID, Error: &jsonrpc.Error{
			Code: jsonrpc.CodeInternalError, Message: "mcpproxy: the result could not be encoded",
		}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
	w.WriteHeader(status)
	_, _ = w.Write(raw)
}

// ErrWithdrawn is the cause a server's request being answered ends with
// when the server withdraws it (notifications/cancelled).
var ErrWithdrawn = errors.New("the server withdrew its request")

// IDKey returns the canonical form of a request id that the direct path
// keeps, a string or an integer, so that a cancellation finds its call.
func IDKey(id json.RawMessage) (string, bool) {
	if len(id) > 0 && id[0] == '"' {
		var s string
		if json.Unmarshal(id, &s) != nil {
			return "", false
		}
		return strconv.Quote(s), true
	}
	n, err := strconv.ParseInt(string(id), 10, 64)
	if err != nil {
		return "", false
	}
	return strconv.FormatInt(n, 10), true
}

// RPCError is the JSON-RPC error of ae, an answer of the REST routes:
// its data carries ae's stable code (and retry_after_seconds), and the
// id of the HTTP request that carried the call (requestID), which the
// gateway's log lines about it carry: an MCP client shows the error, not
// the X-Request-Id header. Refusals about the request are invalid params,
// as the go-sdk answers an unknown tool; the rest are internal errors.
func RPCError(ae *apierror.Error, requestID string) *jsonrpc.Error {
	data := map[string]any{"code": ae.Code().String()}
	if requestID != "" {
		data["request_id"] = requestID
	}
	if ae.RetryAfter > 0 {
		data["retry_after_seconds"] = int64((ae.RetryAfter + time.Second - 1) / time.Second)
	}
	// An action the owner must approve names itself, as the REST answer
	// does, so an agent can wait on it.
	for _, k := range []string{"action_id", "expires_at"} {
		if v, ok := ae.Extra[k]; ok {
			data[k] = v
		}
	}
	raw, _ := json.Marshal(data)
	code := int64(jsonrpc.CodeInternalError)
	switch ae.Code().Status() {
	case http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound:
		code = jsonrpc.CodeInvalidParams
	}
	return &jsonrpc.Error{Code: code, Message: ae.Message, Data: raw}
}
