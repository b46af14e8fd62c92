package errcode

import (
	"errors"
	"fmt"
	"iter"
	"net/http"
)

// Code is one row of the table of error codes. Only the constants below name
// codes, so a misspelt code does not compile; the zero Code is
// InternalError, so an error that forgets its code answers 500.
type Code uint8

// The codes, in the order of the package documentation's table.
const (
	InternalError Code = iota
	ValidationError
	NotFound
	MethodNotAllowed
	NotAcceptable
	UnsupportedMediaType
	RequestBodyTooLarge
	RequestBodyCapacityExhausted
	RequestTargetForeign
	AdminUnauthorized
	AdminForbidden
	OriginForbidden

	AuthHeadersInvalid
	AuthSignatureInvalid
	AuthSignedComponentsInvalid
	AuthIdentityInvalid
	AuthNonceInvalid
	AuthReplayDetected
	AuthForbidden
	NonceStoreFull
	NonceStoreUnavailable

	AuthClaimsUnavailable
	AuthClaimsLookupFailed
	AuthClaimRequired
	AuthClaimRevoked
	AuthClaimRejected
	AuthClaimSubmitRateLimited
	AuthClaimSubmitFailed
	AuthActionApprovalRequired
	AuthActionDenied
	AuthActionSubmitFailed

	ConnectionNotFound
	ConnectionDisabled
	ConnectionProtocolMismatch
	ConnectionExists
	RotationRequired
	CredentialUnresolved
	ConnectionMisconfigured
	VariableNotFound
	VariableInUse
	UpstreamError
	UpstreamTimeout
	UpstreamAuthUnavailable
	UpstreamAuthRequired

	AdminTokenRequired
	DiscoveryUnavailable
	PlaintextSecretRefused
	ServiceAPIKeyMissing

	MCPToolNotFound
	MCPToolForbidden
	MCPToolChanged
	MCPToolArgumentsInvalid
	MCPToolRateLimited
	MCPCircuitOpen
	MCPSessionNotFound
	MCPSessionsExhausted
	MCPSessionMisdirected
	MCPHeaderMismatch

	RateLimited
	APIKeyInvalid
	APIKeyNotFound
	APIKeyLimitReached
	ServiceLimitReached
	ServiceNotFound
	ServiceMismatch
	FeedCursorExpired
	SlugTaken
	NamespaceNotFound
	NamespaceDeactivated
	NamespaceTaken
	NamespaceForbidden
	NamespaceInvalid
	InvalidDID
	DIDNotFound
	ClaimNotFound
	ClaimStateConflict
	PendingLimitReached
	AgentPendingLimitReached
	DatabaseUnavailable
	DatabaseBusy
	RegistryWriteFailed
	CredentialInvalid
	ChallengeInvalid
	ChallengeExpired
	WebAuthnFailed
	PasskeyCounterRegression
	PasskeyExists
	PasskeyNotFound
	LastPasskey
	NoPasskeys
	ReauthRequired
	SessionNotFound
	SessionLimitReached
	SigninLinkInvalid
	WebhooksDisabled
	WebhookNotFound
	WebhookLimitReached
	WebhookURLForbidden
	GatewayNotFound
	GatewayNotPaired
	GatewayOffline
	GatewayTimeout
	GatewayRPCLimitReached
	PairingCodeInvalid
	PairingExpired
	PairingEnded
	PairingLimitReached
	GatewayLimitReached
	ActionNotFound
	ActionStateConflict

	codeCount // not a code: the length of the table
)

type row struct {
	name    string
	status  int
	message string
}

// table is the one place where a code gets its wire name, HTTP status and
// default message. Messages are safe to show any caller.
var table = [codeCount]row{
	InternalError:                {"INTERNAL_ERROR", http.StatusInternalServerError, "internal error"},
	ValidationError:              {"VALIDATION_ERROR", http.StatusBadRequest, "invalid request"},
	NotFound:                     {"NOT_FOUND", http.StatusNotFound, "not found"},
	MethodNotAllowed:             {"METHOD_NOT_ALLOWED", http.StatusMethodNotAllowed, "method not allowed"},
	NotAcceptable:                {"NOT_ACCEPTABLE", http.StatusNotAcceptable, "no acceptable media type"},
	UnsupportedMediaType:         {"UNSUPPORTED_MEDIA_TYPE", http.StatusUnsupportedMediaType, "Content-Type must be application/json"},
	RequestBodyTooLarge:          {"REQUEST_BODY_TOO_LARGE", http.StatusRequestEntityTooLarge, "request body is too large"},
	RequestBodyCapacityExhausted: {"REQUEST_BODY_CAPACITY_EXHAUSTED", http.StatusServiceUnavailable, "the server is holding as many request bodies as it may; try again shortly"},
	RequestTargetForeign:         {"REQUEST_TARGET_FOREIGN", http.StatusBadRequest, "the absolute-form request target names another server; send the path only"},
	AdminUnauthorized:            {"ADMIN_UNAUTHORIZED", http.StatusUnauthorized, "this route needs credentials: the admin bearer token, or a live idn_session"},
	AdminForbidden:               {"ADMIN_FORBIDDEN", http.StatusForbidden, "admin access refused"},
	OriginForbidden:              {"ORIGIN_FORBIDDEN", http.StatusForbidden, "request origin is not allowed"},

	AuthHeadersInvalid:          {"AUTH_HEADERS_INVALID", http.StatusForbidden, "signed headers are missing, duplicated or malformed"},
	AuthSignatureInvalid:        {"AUTH_SIGNATURE_INVALID", http.StatusForbidden, "request signature verification failed"},
	AuthSignedComponentsInvalid: {"AUTH_SIGNED_COMPONENTS_INVALID", http.StatusForbidden, "signed components do not match the idn-rfc9421-v1 profile"},
	AuthIdentityInvalid:         {"AUTH_IDENTITY_INVALID", http.StatusForbidden, "identity headers or agent certificate are missing or invalid"},
	AuthNonceInvalid:            {"AUTH_NONCE_INVALID", http.StatusForbidden, "signature nonce is missing or malformed"},
	AuthReplayDetected:          {"AUTH_REPLAY_DETECTED", http.StatusForbidden, "nonce already used; retry with a new nonce"},
	AuthForbidden:               {"AUTH_FORBIDDEN", http.StatusForbidden, "request refused"},
	NonceStoreFull:              {"NONCE_STORE_FULL", http.StatusServiceUnavailable, "the server is at its replay-protection capacity; try again shortly"},
	NonceStoreUnavailable:       {"NONCE_STORE_UNAVAILABLE", http.StatusServiceUnavailable, "the server cannot record nonces right now; try again shortly"},

	AuthClaimsUnavailable:      {"AUTH_CLAIMS_UNAVAILABLE", http.StatusServiceUnavailable, "approved claims are not available; try again shortly"},
	AuthClaimsLookupFailed:     {"AUTH_CLAIMS_LOOKUP_FAILED", http.StatusInternalServerError, "approved-claims lookup failed"},
	AuthClaimRequired:          {"AUTH_CLAIM_REQUIRED", http.StatusForbidden, "this agent is not approved for this service; the namespace owner must approve the claim"},
	AuthClaimRevoked:           {"AUTH_CLAIM_REVOKED", http.StatusForbidden, "the namespace owner revoked this agent's claim for this service; only the owner can approve it again"},
	AuthClaimRejected:          {"AUTH_CLAIM_REJECTED", http.StatusForbidden, "the namespace owner rejected this agent's claim for this service; only the owner can approve it"},
	AuthClaimSubmitRateLimited: {"AUTH_CLAIM_SUBMIT_RATE_LIMITED", http.StatusTooManyRequests, "too many claims submitted for this namespace; try again later"},
	AuthClaimSubmitFailed:      {"AUTH_CLAIM_SUBMIT_FAILED", http.StatusBadGateway, "the gateway could not file this agent's claim with the control plane, so there is no claim to approve; the gateway's log has the cause under this request id"},
	AuthActionApprovalRequired: {"AUTH_ACTION_APPROVAL_REQUIRED", http.StatusForbidden, "this call needs the namespace owner's approval; the gateway filed an action request (action_id) that the owner approves with a passkey before expires_at"},
	AuthActionDenied:           {"AUTH_ACTION_DENIED", http.StatusForbidden, "the namespace owner denied this call"},
	AuthActionSubmitFailed:     {"AUTH_ACTION_SUBMIT_FAILED", http.StatusBadGateway, "the gateway could not file the action request with the control plane, so there is nothing to approve; the gateway's log has the cause under this request id"},

	ConnectionNotFound:         {"CONNECTION_NOT_FOUND", http.StatusNotFound, "connection not found"},
	ConnectionDisabled:         {"CONNECTION_DISABLED", http.StatusForbidden, "the connection is disabled"},
	ConnectionProtocolMismatch: {"CONNECTION_PROTOCOL_MISMATCH", http.StatusBadRequest, "the connection does not serve this protocol"},
	ConnectionExists:           {"CONNECTION_EXISTS", http.StatusConflict, "a connection with this id already exists"},
	RotationRequired:           {"ROTATION_REQUIRED", http.StatusForbidden, "the connection's credential is overdue for rotation"},
	CredentialUnresolved:       {"CREDENTIAL_UNRESOLVED", http.StatusInternalServerError, "the connection's stored credential cannot be resolved"},
	ConnectionMisconfigured:    {"CONNECTION_MISCONFIGURED", http.StatusInternalServerError, "the connection is misconfigured on the gateway"},
	VariableNotFound:           {"VARIABLE_NOT_FOUND", http.StatusNotFound, "credential variable not found"},
	VariableInUse:              {"VARIABLE_IN_USE", http.StatusConflict, "the credential variable is still referenced by a connection"},
	UpstreamError:              {"UPSTREAM_ERROR", http.StatusBadGateway, "the upstream could not be reached or failed"},
	UpstreamTimeout:            {"UPSTREAM_TIMEOUT", http.StatusGatewayTimeout, "the upstream did not answer in time"},
	UpstreamAuthUnavailable:    {"UPSTREAM_AUTH_UNAVAILABLE", http.StatusServiceUnavailable, "no access token from the connection's OAuth provider; try again after retry_after_seconds"},
	UpstreamAuthRequired:       {"UPSTREAM_AUTH_REQUIRED", http.StatusForbidden, "no OAuth account connected for this subject; the owner must connect one"},

	AdminTokenRequired:     {"ADMIN_TOKEN_REQUIRED", http.StatusUnauthorized, "changing where or how a stored secret is sent needs the admin token"},
	DiscoveryUnavailable:   {"DISCOVERY_UNAVAILABLE", http.StatusNotImplemented, "MCP discovery is not available in this gateway"},
	PlaintextSecretRefused: {"PLAINTEXT_SECRET_REFUSED", http.StatusBadRequest, "a secret sent in clear over the pairing relay is refused; seal it to the gateway's HPKE key"},
	ServiceAPIKeyMissing:   {"SERVICE_API_KEY_MISSING", http.StatusConflict, "the gateway has no service API key for this connection's service and is not paired, so it could neither read nor file its claims"},

	MCPToolNotFound:         {"MCP_TOOL_NOT_FOUND", http.StatusNotFound, "tool not found"},
	MCPToolForbidden:        {"MCP_TOOL_FORBIDDEN", http.StatusForbidden, "tool not allowed for this subject"},
	MCPToolChanged:          {"MCP_TOOL_CHANGED", http.StatusForbidden, "the tool's definition changed since it was approved; it waits for review"},
	MCPToolArgumentsInvalid: {"MCP_TOOL_ARGUMENTS_INVALID", http.StatusBadRequest, "invalid tool arguments"},
	MCPToolRateLimited:      {"MCP_TOOL_RATE_LIMITED", http.StatusTooManyRequests, "tool-call rate limit exceeded"},
	MCPCircuitOpen:          {"MCP_CIRCUIT_OPEN", http.StatusServiceUnavailable, "the upstream MCP server keeps failing; calls resume after a cooldown"},
	MCPSessionNotFound:      {"MCP_SESSION_NOT_FOUND", http.StatusNotFound, "no such MCP session"},
	MCPSessionsExhausted:    {"MCP_SESSIONS_EXHAUSTED", http.StatusServiceUnavailable, "too many MCP sessions are open; try again shortly"},
	MCPSessionMisdirected:   {"MCP_SESSION_MISDIRECTED", http.StatusMisdirectedRequest, "this MCP session belongs to another gateway replica; route requests by Mcp-Session-Id to the replica that opened it"},
	MCPHeaderMismatch:       {"MCP_HEADER_MISMATCH", http.StatusBadRequest, "the Mcp-Method or Mcp-Name header does not match the message"},

	RateLimited:              {"RATE_LIMITED", http.StatusTooManyRequests, "too many attempts; retry later"},
	APIKeyInvalid:            {"API_KEY_INVALID", http.StatusUnauthorized, "missing or invalid service api key"},
	APIKeyNotFound:           {"API_KEY_NOT_FOUND", http.StatusNotFound, "api key not found"},
	APIKeyLimitReached:       {"API_KEY_LIMIT_REACHED", http.StatusConflict, "the service already has the maximum number of active api keys"},
	ServiceLimitReached:      {"SERVICE_LIMIT_REACHED", http.StatusConflict, "the namespace already has the maximum number of services"},
	ServiceNotFound:          {"SERVICE_NOT_FOUND", http.StatusNotFound, "service not found"},
	ServiceMismatch:          {"SERVICE_MISMATCH", http.StatusForbidden, "service differs from the api key's service"},
	FeedCursorExpired:        {"FEED_CURSOR_EXPIRED", http.StatusGone, "the feed no longer holds the changes since this cursor; read the whole feed again"},
	SlugTaken:                {"SLUG_TAKEN", http.StatusConflict, "service slug is already taken"},
	NamespaceNotFound:        {"NAMESPACE_NOT_FOUND", http.StatusNotFound, "namespace not found"},
	NamespaceDeactivated:     {"NAMESPACE_DEACTIVATED", http.StatusForbidden, "namespace is deactivated"},
	NamespaceTaken:           {"NAMESPACE_TAKEN", http.StatusConflict, "namespace is not available"},
	NamespaceForbidden:       {"NAMESPACE_FORBIDDEN", http.StatusForbidden, "not authorized for this namespace"},
	NamespaceInvalid:         {"NAMESPACE_INVALID", http.StatusBadRequest, "invalid namespace format"},
	InvalidDID:               {"INVALID_DID", http.StatusBadRequest, "malformed DID"},
	DIDNotFound:              {"DID_NOT_FOUND", http.StatusNotFound, "DID not found"},
	ClaimNotFound:            {"CLAIM_NOT_FOUND", http.StatusNotFound, "claim not found"},
	ClaimStateConflict:       {"CLAIM_STATE_CONFLICT", http.StatusConflict, "transition not allowed"},
	PendingLimitReached:      {"PENDING_LIMIT_REACHED", http.StatusTooManyRequests, "the namespace has too many pending claims for this service"},
	AgentPendingLimitReached: {"AGENT_PENDING_LIMIT_REACHED", http.StatusTooManyRequests, "this agent address has too many pending claims for the namespace and service"},
	DatabaseUnavailable:      {"DATABASE_UNAVAILABLE", http.StatusServiceUnavailable, "database unavailable"},
	DatabaseBusy:             {"DATABASE_BUSY", http.StatusServiceUnavailable, "the database is busy with other writes; retry after Retry-After seconds"},
	RegistryWriteFailed:      {"REGISTRY_WRITE_FAILED", http.StatusBadGateway, "the registry write failed; the claim is unchanged"},
	CredentialInvalid:        {"CREDENTIAL_INVALID", http.StatusBadRequest, "credential is not a valid PublicKeyCredential JSON"},
	ChallengeInvalid:         {"CHALLENGE_INVALID", http.StatusUnauthorized, "unknown or already used challenge for this ceremony"},
	ChallengeExpired:         {"CHALLENGE_EXPIRED", http.StatusUnauthorized, "challenge expired: request new options"},
	WebAuthnFailed:           {"WEBAUTHN_FAILED", http.StatusUnauthorized, "passkey verification failed"},
	PasskeyCounterRegression: {"PASSKEY_COUNTER_REGRESSION", http.StatusUnauthorized, "signature counter did not increase: the authenticator may be cloned"},
	PasskeyExists:            {"PASSKEY_EXISTS", http.StatusConflict, "this passkey is already registered"},
	PasskeyNotFound:          {"PASSKEY_NOT_FOUND", http.StatusNotFound, "passkey not found"},
	LastPasskey:              {"LAST_PASSKEY", http.StatusConflict, "the last passkey of an account cannot be deleted"},
	NoPasskeys:               {"NO_PASSKEYS", http.StatusConflict, "the namespace has no passkey to sign in with"},
	ReauthRequired:           {"REAUTH_REQUIRED", http.StatusForbidden, "verify with an established passkey again (GET /v1/auth/verify/options, POST /v1/auth/verify) within 5 minutes before this action"},
	SessionNotFound:          {"SESSION_NOT_FOUND", http.StatusNotFound, "session not found"},
	SessionLimitReached:      {"SESSION_LIMIT_REACHED", http.StatusTooManyRequests, "the namespace has the maximum number of live sessions; end one, or retry when the oldest expires"},
	SigninLinkInvalid:        {"SIGNIN_LINK_INVALID", http.StatusUnauthorized, "this sign-in link is unknown, already used or expired; create a new one"},
	WebhooksDisabled:         {"WEBHOOKS_DISABLED", http.StatusServiceUnavailable, "webhooks are not configured on this control plane"},
	WebhookNotFound:          {"WEBHOOK_NOT_FOUND", http.StatusNotFound, "webhook not found"},
	WebhookLimitReached:      {"WEBHOOK_LIMIT_REACHED", http.StatusConflict, "the service already has the maximum number of webhooks"},
	WebhookURLForbidden:      {"WEBHOOK_URL_FORBIDDEN", http.StatusBadRequest, "webhook url points to a private or special-use address"},
	GatewayNotFound:          {"GATEWAY_NOT_FOUND", http.StatusNotFound, "gateway not found"},
	GatewayNotPaired:         {"GATEWAY_NOT_PAIRED", http.StatusForbidden, "this gateway key is not paired; pair it again from the dashboard"},
	GatewayOffline:           {"GATEWAY_OFFLINE", http.StatusConflict, "the gateway is not connected"},
	GatewayTimeout:           {"GATEWAY_TIMEOUT", http.StatusGatewayTimeout, "the gateway did not answer in time"},
	GatewayRPCLimitReached:   {"GATEWAY_RPC_LIMIT_REACHED", http.StatusTooManyRequests, "too many RPCs are waiting for this owner or gateway; retry when one has been answered"},
	PairingCodeInvalid:       {"PAIRING_CODE_INVALID", http.StatusUnauthorized, "unknown pairing session or wrong pairing code"},
	PairingExpired:           {"PAIRING_EXPIRED", http.StatusGone, "the pairing session expired; start a new one"},
	PairingEnded:             {"PAIRING_ENDED", http.StatusGone, "the pairing session was used or ended after too many wrong codes; start a new one"},
	PairingLimitReached:      {"PAIRING_LIMIT_REACHED", http.StatusTooManyRequests, "the namespace has the maximum number of open pairing sessions; retry when one is used or expires"},
	GatewayLimitReached:      {"GATEWAY_LIMIT_REACHED", http.StatusConflict, "the namespace already has the maximum number of paired gateways; unpair one first"},
	ActionNotFound:           {"ACTION_NOT_FOUND", http.StatusNotFound, "action request not found"},
	ActionStateConflict:      {"ACTION_STATE_CONFLICT", http.StatusConflict, "the action request is no longer pending (decided or expired)"},
}

// former are the wire names codes had before the gateway and the control
// plane shared one vocabulary (docs/errors.md, "Renamed codes"): Parse
// reads them, so a client still understands a server that answers them.
// SIGNATURE_INVALID named every signature failure of the control plane;
// its details.reason was the code that replaced it.
var former = map[string]Code{
	"SIGNATURE_INVALID":  AuthSignatureInvalid,
	"NONCE_REPLAY":       AuthReplayDetected,
	"UNAUTHENTICATED":    AdminUnauthorized,
	"MCP_UPSTREAM_ERROR": UpstreamError,
	"INVALID_NAMESPACE":  NamespaceInvalid,
	"METRICS_FORBIDDEN":  AdminForbidden,
}

// byName finds a code from its wire name or a former one.
var byName = func() map[string]Code {
	m := make(map[string]Code, int(codeCount)+len(former))
	for name, c := range former {
		m[name] = c
	}
	for c := range All() {
		m[c.String()] = c
	}
	return m
}()

func (c Code) row() row {
	if c >= codeCount {
		return table[InternalError]
	}
	return table[c]
}

// String returns the wire name, e.g. "AUTH_CLAIM_REQUIRED".
func (c Code) String() string { return c.row().name }

// Status returns the HTTP status answered with the code.
func (c Code) Status() int { return c.row().status }

// Message returns the default message: what the code means, safe to show
// any caller.
func (c Code) Message() string { return c.row().message }

// DocsBase is where the codes are documented: docs/errors.md of the
// repository, one row per code anchored by its wire name.
const DocsBase = "https://github.com/idnhq/idn/blob/main/docs/errors.md#"

// DocsURL returns the link to the code's row in docs/errors.md, the
// envelope's docs_url.
func (c Code) DocsURL() string { return DocsBase + c.String() }

// MarshalText encodes the wire name, so a Code in JSON is its name.
func (c Code) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText decodes a wire name; a name outside the table is an error.
func (c *Code) UnmarshalText(b []byte) error {
	code, ok := Parse(string(b))
	if !ok {
		return fmt.Errorf("errcode: unknown code %q", b)
	}
	*c = code
	return nil
}

// Parse returns the code whose wire name is name, or that was named name
// before a rename.
func Parse(name string) (Code, bool) {
	c, ok := byName[name]
	return c, ok
}

// All yields every code in table order.
func All() iter.Seq[Code] {
	return func(yield func(Code) bool) {
		for c := range codeCount {
			if !yield(c) {
				return
			}
		}
	}
}

// Error is an error that carries its code. The errors of every idn package
// that answers HTTP requests implement it, directly or by wrapping one that
// does.
type Error interface {
	error
	Code() Code
}

// Of returns the code of the first error in err's chain that carries one.
func Of(err error) (Code, bool) {
	if e, ok := errors.AsType[Error](err); ok {
		return e.Code(), true
	}
	return 0, false
}

// New returns a sentinel error with the given message that carries code.
// Like errors.New, each call returns a distinct error for errors.Is.
func New(code Code, message string) Error { return &sentinel{code: code, msg: message} }

type sentinel struct {
	code Code
	msg  string
}

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Code() Code    { return e.code }
