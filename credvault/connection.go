package credvault

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idnhq/idn/approval"
)

// Protocols of a connection.
const (
	ProtocolHTTP = "http"
	ProtocolMCP  = "mcp"
)

// Authentication modes: how the secret is put on the upstream request.
const (
	AuthBearer     = "bearer"      // Authorization: <auth_prefix><secret>
	AuthHeaderKey  = "header_key"  // <auth_header_name>: <auth_prefix><secret>
	AuthQueryParam = "query_param" // ?<auth_query_param>=<secret>

	// The OAuth modes put "Authorization: Bearer <access token>" on the
	// request; package upstreamauth gets the token.
	AuthOAuth2ClientCredentials = "oauth2_client_credentials" // the secret is the client secret
	AuthOAuth2AuthorizationCode = "oauth2_authorization_code" // an owner-connected account
)

// Connection statuses.
const (
	StatusActive   = "active"
	StatusDisabled = "disabled"
)

// Defaults applied when a connection is written.
const (
	DefaultAuthHeaderName = "X-API-Key"
	DefaultAuthQueryParam = "api_key"
	DefaultBearerPrefix   = "Bearer "
)

// Connection is an upstream the gateway proxies to. It never holds secret
// values: CredentialKeys
// names the secrets, which stay sealed in the store. Zero times are omitted
// from JSON.
//
// The fields from ID to Extensions are configuration; the fields after it
// are maintained by the Vault and ignored when passed to Create or Update.
//
// The OAuth fields configure the two OAuth modes (see OAuthAccount and
// package upstreamauth); the other modes refuse them.
//
// AllowUpstreamCookies (http connections only) lets the upstream's
// Set-Cookie headers reach agents and the agents' Cookie headers reach the
// upstream. Off by default: the gateway drops Set-Cookie, since a session
// cookie is a credential the agent was never meant to hold.
//
// ApprovalTools (mcp) and ApprovalRoutes (http) name the calls that wait
// for the owner's passkey approval (package approval's Rules);
// ApprovalSubjects adds rules for the calls made for one idn-subject
// (approval.Policy).
//
// Extensions are members of the connection's JSON object that other
// packages own (the gateway keeps an MCP connection's settings and last
// discovery there, as mcpproxy defines them): the Vault stores them with
// the connection, encodes them beside its fields and leaves their meaning
// to Config.Extensions. A member named as a field of Connection is never
// an extension.
type Connection struct {
	ID                   string                     `json:"id"`
	Name                 string                     `json:"name,omitempty"`
	Service              string                     `json:"service,omitempty"`
	Protocol             string                     `json:"protocol"`
	BaseURL              string                     `json:"base_url"`
	PathPrefix           string                     `json:"path_prefix,omitempty"`
	AuthMode             string                     `json:"auth_mode,omitempty"`
	AuthPrefix           string                     `json:"auth_prefix,omitempty"`
	AuthHeaderName       string                     `json:"auth_header_name,omitempty"`
	AuthQueryParam       string                     `json:"auth_query_param,omitempty"`
	AuthSecretKey        string                     `json:"auth_secret_key,omitempty"`
	Status               string                     `json:"status"`
	RotationIntervalDays int                        `json:"rotation_interval_days,omitempty"`
	AllowUpstreamCookies bool                       `json:"allow_upstream_cookies,omitempty"`
	OAuthTokenURL        string                     `json:"oauth_token_url,omitempty"`
	OAuthAuthURL         string                     `json:"oauth_authorization_url,omitempty"`
	OAuthIssuer          string                     `json:"oauth_issuer,omitempty"`
	OAuthRevocationURL   string                     `json:"oauth_revocation_url,omitempty"`
	OAuthClientID        string                     `json:"oauth_client_id,omitempty"`
	OAuthScopes          []string                   `json:"oauth_scopes,omitempty"`
	OAuthAudience        string                     `json:"oauth_audience,omitempty"`
	OAuthResource        string                     `json:"oauth_resource,omitempty"`
	OAuthTokenAuthMethod string                     `json:"oauth_token_endpoint_auth_method,omitempty"`
	OAuthPerSubject      bool                       `json:"oauth_per_subject,omitempty"`
	ApprovalTools        []string                   `json:"approval_tools,omitempty"`
	ApprovalRoutes       []string                   `json:"approval_routes,omitempty"`
	ApprovalSubjects     map[string]approval.Rules  `json:"approval_subjects,omitempty"`
	Extensions           map[string]json.RawMessage `json:"-"`

	CredentialKeys    []string        `json:"credential_keys"`
	SecretVersion     int64           `json:"secret_version"`
	LastRotatedAt     time.Time       `json:"last_rotated_at,omitzero"`
	NextRotationDueAt time.Time       `json:"next_rotation_due_at,omitzero"`
	CreatedAt         time.Time       `json:"created_at,omitzero"`
	UpdatedAt         time.Time       `json:"updated_at,omitzero"`
	LastTest          *TestResult     `json:"last_test,omitempty"`
	RotationHistory   []RotationEvent `json:"rotation_history,omitempty"`
	OAuthAccounts     []OAuthAccount  `json:"oauth_accounts,omitempty"`
}

// connectionFields is Connection without its methods, for encoding its own
// fields.
type connectionFields Connection

// fieldNames are the JSON names of Connection's own fields.
var fieldNames = func() map[string]bool {
	names := map[string]bool{}
	t := reflect.TypeFor[Connection]()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "-" {
			names[name] = true
		}
	}
	return names
}()

// MarshalJSON encodes the connection's fields and, after them in name
// order, its extensions.
func (c Connection) MarshalJSON() ([]byte, error) {
	raw, err := json.Marshal(connectionFields(c))
	if err != nil || len(c.Extensions) == 0 {
		return raw, err
	}
	var b bytes.Buffer
	b.Write(raw[:len(raw)-1])
	for _, name := range slices.Sorted(maps.Keys(c.Extensions)) {
		if fieldNames[name] {
			continue
		}
		key, _ := json.Marshal(name)
		val := c.Extensions[name]
		if !json.Valid(val) {
			return nil, fmt.Errorf("credvault: connection %q: extension %s is not JSON", c.ID, key)
		}
		b.WriteByte(',')
		b.Write(key)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON decodes the connection's fields and keeps every other
// member as an extension: the MCP settings of a connection stored before
// they were extensions load as such.
func (c *Connection) UnmarshalJSON(data []byte) error {
	var f connectionFields
	if err := json.Unmarshal(data, &f); err != nil {
		return err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return err
	}
	f.Extensions = nil
	for name, raw := range members {
		if !fieldNames[name] {
			if f.Extensions == nil {
				f.Extensions = map[string]json.RawMessage{}
			}
			f.Extensions[name] = raw
		}
	}
	*c = Connection(f)
	return nil
}

// TestResult is the outcome of the last upstream probe (admin "test").
type TestResult struct {
	OK        bool      `json:"ok"`
	Status    int       `json:"status"`
	LatencyMS int64     `json:"latency_ms"`
	Error     string    `json:"error,omitempty"`
	TestedAt  time.Time `json:"tested_at,omitzero"`
}

// RotationEvent is the metadata of one rotation; secrets are never kept.
type RotationEvent struct {
	Version int64     `json:"version"`
	At      time.Time `json:"at"`
	By      string    `json:"by,omitempty"`
	Reason  string    `json:"reason,omitempty"`
}

// maxRotationHistory bounds rotation_history; older entries are dropped.
const maxRotationHistory = 100

// ServiceSlug is the service named in the claim tuple: Service when set,
// else ID.
func (c *Connection) ServiceSlug() string {
	if c.Service != "" {
		return c.Service
	}
	return c.ID
}

// RotationOverdue reports whether the connection's credentials are due for
// rotation more than grace ago. A connection without a rotation interval is
// never overdue.
func (c *Connection) RotationOverdue(now time.Time, grace time.Duration) bool {
	if c.RotationIntervalDays <= 0 || c.NextRotationDueAt.IsZero() {
		return false
	}
	return now.After(c.NextRotationDueAt.Add(grace))
}

// Clone returns a deep copy of c.
func (c *Connection) Clone() *Connection {
	n := *c
	if c.Extensions != nil {
		n.Extensions = make(map[string]json.RawMessage, len(c.Extensions))
		for k, v := range c.Extensions {
			n.Extensions[k] = slices.Clone(v)
		}
	}
	n.CredentialKeys = slices.Clone(c.CredentialKeys)
	if c.LastTest != nil {
		t := *c.LastTest
		n.LastTest = &t
	}
	n.RotationHistory = slices.Clone(c.RotationHistory)
	n.OAuthScopes = slices.Clone(c.OAuthScopes)
	n.OAuthAccounts = slices.Clone(c.OAuthAccounts)
	n.ApprovalTools = slices.Clone(c.ApprovalTools)
	n.ApprovalRoutes = slices.Clone(c.ApprovalRoutes)
	if c.ApprovalSubjects != nil {
		n.ApprovalSubjects = make(map[string]approval.Rules, len(c.ApprovalSubjects))
		for s, r := range c.ApprovalSubjects {
			n.ApprovalSubjects[s] = approval.Rules{Tools: slices.Clone(r.Tools), Routes: slices.Clone(r.Routes)}
		}
	}
	return &n
}

// normalize fills the defaults of a connection's own configuration in
// place: status active, protocol http, auth_header_name X-API-Key,
// auth_query_param api_key, and auth_prefix "Bearer " for bearer mode when
// empty. Config.Extensions.Check completes the extensions.
func (c *Connection) normalize() {
	if c.Status == "" {
		c.Status = StatusActive
	}
	if c.Protocol == "" {
		c.Protocol = ProtocolHTTP
	}
	if c.AuthHeaderName == "" {
		c.AuthHeaderName = DefaultAuthHeaderName
	}
	if c.AuthQueryParam == "" {
		c.AuthQueryParam = DefaultAuthQueryParam
	}
	if c.AuthMode == AuthBearer && c.AuthPrefix == "" {
		c.AuthPrefix = DefaultBearerPrefix
	}
}

// sortedKeys returns m's keys in order, never nil (so credential_keys is
// [] rather than null in JSON).
func sortedKeys[V any](m map[string]V) []string {
	keys := slices.Sorted(maps.Keys(m))
	if keys == nil {
		keys = []string{}
	}
	return keys
}

// secretRoute are the configuration fields that decide where and how a
// connection's stored secret is sent, by JSON name: the upstream it goes
// to (protocol, base_url, path_prefix, and the extensions that
// Config.Extensions.SecretRoute names), how it travels (auth_mode,
// auth_prefix, auth_header_name, auth_query_param, and auth_secret_key,
// which secret it is), and whether the upstream's session cookies, which
// stand in for it, reach agents (allow_upstream_cookies).
var secretRoute = []struct {
	name string
	get  func(*Connection) string
}{
	{"protocol", func(c *Connection) string { return c.Protocol }},
	{"base_url", func(c *Connection) string { return c.BaseURL }},
	{"path_prefix", func(c *Connection) string { return c.PathPrefix }},
	{"auth_mode", func(c *Connection) string { return c.AuthMode }},
	{"auth_prefix", func(c *Connection) string { return c.AuthPrefix }},
	{"auth_header_name", func(c *Connection) string { return c.AuthHeaderName }},
	{"auth_query_param", func(c *Connection) string { return c.AuthQueryParam }},
	{"auth_secret_key", func(c *Connection) string { return c.AuthSecretKey }},
	{"allow_upstream_cookies", func(c *Connection) string { return strconv.FormatBool(c.AllowUpstreamCookies) }},
	// The client secret and refresh tokens go to these.
	{"oauth_token_url", func(c *Connection) string { return c.OAuthTokenURL }},
	{"oauth_issuer", func(c *Connection) string { return c.OAuthIssuer }},
	{"oauth_revocation_url", func(c *Connection) string { return c.OAuthRevocationURL }},
}

// SecretRouteChanges returns the JSON names of the fields, among those
// that decide where and how the stored secret is sent, whose values differ
// between before and after once defaults are applied (an emptied
// auth_header_name that falls back to the default it had is no change).
// An admin API changing any of them can hand the secret to whoever it
// names, so it needs more than a local caller.
func (v *Vault) SecretRouteChanges(before, after *Connection) []string {
	b, a := before.Clone(), after.Clone()
	for _, c := range []*Connection{b, a} {
		c.normalize()
		if v.ext.Check != nil {
			_ = v.ext.Check(c) // an invalid change is refused later; its route is compared as it stands
		}
	}
	var changed []string
	for _, f := range secretRoute {
		if f.get(b) != f.get(a) {
			changed = append(changed, f.name)
		}
	}
	for _, name := range v.ext.SecretRoute {
		if !bytes.Equal(b.Extensions[name], a.Extensions[name]) {
			changed = append(changed, name)
		}
	}
	return changed
}
