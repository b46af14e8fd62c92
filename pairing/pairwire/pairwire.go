// Package pairwire is the wire format shared by the control plane and a
// paired gateway: the messages of the gateway's WebSocket, its close
// codes, and the HPKE suite the dashboard seals secrets with.
//
// The socket carries one JSON text message per frame. The gateway opens it
// with an upgrade request signed by its own identity (profile
// idn-rfc9421-v1). A gateway that is not paired yet names its pairing
// session in the upgrade's query (?pairing=<session id>, so the signature
// covers it) and sends a Pair message first. The control plane then sends
// a Control message of type "ready" (or "error" before it closes), after
// which it sends JSON-RPC 2.0 requests and the gateway answers each with a
// JSON-RPC 2.0 response of the same id.
//
// Secrets sealed for a gateway use RFC 9180 HPKE in base mode with
// DHKEM(X25519, HKDF-SHA256), HKDF-SHA256 and AES-256-GCM, single shot,
// with Info(gatewayID) as info and no additional data; the sealed form is
// base64url (no padding) of enc || ciphertext.
package pairwire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Path is the control plane's WebSocket route.
const Path = "/v1/gateways/connect"

// PairingQuery is the upgrade's query parameter that names the pairing
// session an unpaired gateway means to complete.
const PairingQuery = "pairing"

// MaxMessageBytes is the largest message either side accepts as a request
// or an answer; a larger one is answered with an error and the socket stays
// up. ReadLimit is the largest frame read at all: beyond it the socket is
// closed, since the frame cannot be skipped without reading it.
const (
	MaxMessageBytes = 1 << 20
	ReadLimit       = 4 << 20
)

// Pair is the first message of an unpaired gateway.
type Pair struct {
	SessionID     string `json:"session_id"`
	PairCode      string `json:"pair_code"`
	Namespace     string `json:"namespace,omitempty"` // the owner's namespace the operator meant to pair with
	Name          string `json:"name"`
	Version       string `json:"version"`
	HPKEPublicKey string `json:"hpke_public_key"` // base64url (no padding) of the raw 32-byte X25519 key
}

// Control is a message of the control plane that is not an RPC request.
type Control struct {
	Type      string `json:"type"` // ControlReady or ControlError
	GatewayID string `json:"gateway_id,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Code      string `json:"code,omitempty"`
	Message   string `json:"message,omitempty"`
	// OwnerKeys (ready) are the owner's passkeys as package approval's
	// Keys: the gateway pins them when it is first paired and verifies
	// owner-approved actions against them.
	OwnerKeys json.RawMessage `json:"owner_keys,omitempty"`
	// OwnerKeysUpdate (ready) is the owner's latest key-set change, an
	// approval.KeysUpdate, so a gateway that was away catches up; the
	// MethodOwnerKeysUpdate RPC brings one to a connected gateway.
	OwnerKeysUpdate json.RawMessage `json:"owner_keys_update,omitempty"`
}

// Control message types.
const (
	ControlReady = "ready"
	ControlError = "error"
)

// Close codes of the socket (RFC 6455 private range), so a gateway knows
// whether reconnecting can help.
const (
	// CloseUnpaired: the gateway's key is not (or no longer) paired; a
	// reconnect without pairing again is refused.
	CloseUnpaired = 4403
	// ClosePairingFailed: the pairing message was refused (wrong or
	// expired code, ended session, bad key).
	ClosePairingFailed = 4401
	// CloseReplaced: the same gateway connected again elsewhere.
	CloseReplaced = 4409
)

// InfoPrefix starts the HPKE info of every sealed secret.
const InfoPrefix = "idn-pairing-v1"

// Info is the HPKE info for secrets sealed to gatewayID.
func Info(gatewayID string) []byte { return []byte(InfoPrefix + gatewayID) }

// Fingerprint is how a gateway's HPKE key is shown: the lower-case hex of
// the first 8 bytes of the SHA-256 of the raw public key.
func Fingerprint(rawPublicKey []byte) string {
	sum := sha256.Sum256(rawPublicKey)
	return hex.EncodeToString(sum[:8])
}

// JSON-RPC 2.0 error codes used over the socket beyond the standard ones
// (-32700 parse error, -32600 invalid request, -32601 method not found,
// -32602 invalid params, -32603 internal error).
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// CodeAPIError carries an admin API error: data holds its envelope
	// (status, code, error, details).
	CodeAPIError = -32000
	// CodeBusy refuses a request that arrived while the gateway ran as
	// many as it runs at once; the control plane's own cap per gateway
	// keeps it from sending one.
	CodeBusy = -32001
)

// Methods are the RPC methods a paired gateway serves.
var Methods = []string{
	"connections.list", "connections.get", "connections.create", "connections.update", "connections.delete",
	"connections.test", "connections.discover", "connections.rotate", "connections.disconnect_account",
	"connections.tool_pins", "connections.accept_tools", "connections.reject_tools",
	"variables.list", "variables.set", "variables.delete",
}

// MethodOwnerKeysUpdate brings the owner's signed key-set change (an
// approval.KeysUpdate, params {"update": …}) to a paired gateway. The
// control plane sends it itself once it checked the owner's assertion;
// it is not one of the Methods an owner's session may call.
const MethodOwnerKeysUpdate = "owner_keys.update"

// The connect flow of an oauth2_authorization_code account from the
// dashboard. The control plane sends them itself; they are not Methods
// an owner's session may call, since the control plane must remember
// which gateway a state belongs to, and relays the provider's redirect.
const (
	// MethodConnectStart: params {"id","subject"?,"redirect_uri"}; the
	// result {"authorization_url","state","expires_at"}. The gateway keeps
	// state and the PKCE verifier.
	MethodConnectStart = "connections.connect_start"
	// MethodConnectFinish: params {"id","subject"?,"query"}, query the
	// redirect's state, iss, and code or error; the result
	// {"connection_id","subject"?,"status"}.
	MethodConnectFinish = "connections.connect_finish"
)

// ActivityPath is the control plane's route where a paired gateway
// reports its decisions: a POST signed by the gateway's own identity (the
// key the pairing bound), whose body is an ActivityBatch. It is not the
// socket, so that the process serving agents reports even when another
// process holds the socket.
const ActivityPath = "/v1/gateways/activity"

// MaxActivityBatch is the most records one ActivityBatch may carry.
const MaxActivityBatch = 500

// ActivityBatch is the body of a POST to ActivityPath.
type ActivityBatch struct {
	Records []Activity `json:"records"`
	// Dropped counts the records the gateway dropped since its last
	// batch because its queue was full.
	Dropped int64 `json:"dropped,omitempty"`
	// Unverified counts the requests refused before a signature verified
	// since the gateway's last batch, by protocol and reason, at most
	// MaxUnverifiedCounts entries: never a record each, since their
	// senders chose everything else about them.
	Unverified []UnverifiedCount `json:"unverified,omitempty"`
}

// MaxUnverifiedCounts is the most Unverified entries one ActivityBatch
// may carry.
const MaxUnverifiedCounts = 64

// UnverifiedCount is how many requests a gateway refused for one reason
// before a signature verified.
type UnverifiedCount struct {
	// At is when the first of them was refused (RFC 3339 with fraction).
	At string `json:"at"`
	// Protocol is "http" or "mcp"; Reason the error code answered.
	Protocol string `json:"protocol"`
	Reason   string `json:"reason"`
	Count    int64  `json:"count"`
}

// Activity is one decision of a gateway about an agent's request: never
// a payload, a query string, a header or a secret.
type Activity struct {
	// At is when the decision was made (RFC 3339 with fraction).
	At string `json:"at"`
	// AgentName is the agent's certificate name, "" for none; AgentKey
	// its public key ("ed25519:<base64>"), "" when the request was
	// refused before a signature verified.
	AgentName string `json:"agent_name,omitempty"`
	AgentKey  string `json:"agent_key,omitempty"`
	// Connection is the connection id the request named; Service its
	// service slug, "" when the connection is unknown.
	Connection string `json:"connection"`
	Service    string `json:"service,omitempty"`
	// Protocol is "http" or "mcp".
	Protocol string `json:"protocol"`
	// Method is the HTTP method, or for MCP the JSON-RPC method
	// (tools/list, tools/call).
	Method string `json:"method"`
	// Route is the path template after the connection (REST): every
	// segment that may carry a value replaced by a placeholder, never the
	// query. Tool is the MCP tool of a tools/call.
	Route string `json:"route,omitempty"`
	Tool  string `json:"tool,omitempty"`
	// Decision is "allow" or "deny"; Reason the error code of a refusal or
	// of a failed upstream exchange, "" otherwise.
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// Status is the HTTP status answered to the agent, 0 when not one of
	// its own (an MCP tool call inside a stream).
	Status int `json:"status,omitempty"`
	// LatencyMS is the time from the request's arrival to the decision's
	// answer (the upstream's response headers for a forwarded request).
	LatencyMS float64 `json:"latency_ms,omitempty"`
	// Account names the OAuth account that served the call (or would
	// have) on an oauth2_authorization_code connection: the subject it
	// serves, "" for the connection's one account. Absent on other
	// connections. Never a token.
	Account *string `json:"account,omitempty"`
	// AccountNeedsReconnecting: the call was refused because the provider
	// refused the account's refresh token.
	AccountNeedsReconnecting bool `json:"account_needs_reconnecting,omitempty"`
	// Event, when set (one of the Event constants), makes the record a
	// change the gateway made that no request caused; then AgentKey and
	// Method are empty.
	Event string `json:"event,omitempty"`
}

// Decisions of an Activity.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
)

// Events of an Activity: changes of an MCP connection's pinned tool
// definitions (package toolpin), which no agent's request made. Tool
// names the tool; AgentName who accepted or rejected it. Decision is deny,
// with Reason MCP_TOOL_CHANGED, while agents do not get the definition
// listed (changed, new, rejected), allow once they do (pinned, accepted).
const (
	EventToolPinned   = "tool_pinned"
	EventToolChanged  = "tool_changed"
	EventToolNew      = "tool_new"
	EventToolAccepted = "tool_accepted"
	EventToolRejected = "tool_rejected"
)
