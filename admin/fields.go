package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"sort"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/credvault"
)

// fieldSetter writes one JSON field into a connection; a JSON null sets the
// field's zero value (clears it).
type fieldSetter func(c *credvault.Connection, raw json.RawMessage) error

func field[T any](get func(*credvault.Connection) *T) fieldSetter {
	return func(c *credvault.Connection, raw json.RawMessage) error {
		var v T
		if !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			if err := json.Unmarshal(raw, &v); err != nil {
				return err
			}
		}
		*get(c) = v
		return nil
	}
}

// writableFields are the configuration fields POST and PATCH accept. id and
// secrets are create-only and handled by the create route; everything else
// in a connection object (credential_keys, secret_version, timestamps,
// last_test, rotation_history, mcp_discovery) is maintained by the gateway.
var writableFields = map[string]fieldSetter{
	"name":                    field(func(c *credvault.Connection) *string { return &c.Name }),
	"service":                 field(func(c *credvault.Connection) *string { return &c.Service }),
	"protocol":                field(func(c *credvault.Connection) *string { return &c.Protocol }),
	"base_url":                field(func(c *credvault.Connection) *string { return &c.BaseURL }),
	"path_prefix":             field(func(c *credvault.Connection) *string { return &c.PathPrefix }),
	"auth_mode":               field(func(c *credvault.Connection) *string { return &c.AuthMode }),
	"auth_prefix":             field(func(c *credvault.Connection) *string { return &c.AuthPrefix }),
	"auth_header_name":        field(func(c *credvault.Connection) *string { return &c.AuthHeaderName }),
	"auth_query_param":        field(func(c *credvault.Connection) *string { return &c.AuthQueryParam }),
	"auth_secret_key":         field(func(c *credvault.Connection) *string { return &c.AuthSecretKey }),
	"status":                  field(func(c *credvault.Connection) *string { return &c.Status }),
	"rotation_interval_days":  field(func(c *credvault.Connection) *int { return &c.RotationIntervalDays }),
	"allow_upstream_cookies":  field(func(c *credvault.Connection) *bool { return &c.AllowUpstreamCookies }),
	"oauth_token_url":         field(func(c *credvault.Connection) *string { return &c.OAuthTokenURL }),
	"oauth_authorization_url": field(func(c *credvault.Connection) *string { return &c.OAuthAuthURL }),
	"oauth_issuer":            field(func(c *credvault.Connection) *string { return &c.OAuthIssuer }),
	"oauth_revocation_url":    field(func(c *credvault.Connection) *string { return &c.OAuthRevocationURL }),
	"oauth_client_id":         field(func(c *credvault.Connection) *string { return &c.OAuthClientID }),
	"oauth_scopes":            field(func(c *credvault.Connection) *[]string { return &c.OAuthScopes }),
	"oauth_audience":          field(func(c *credvault.Connection) *string { return &c.OAuthAudience }),
	"oauth_resource":          field(func(c *credvault.Connection) *string { return &c.OAuthResource }),
	"oauth_per_subject":       field(func(c *credvault.Connection) *bool { return &c.OAuthPerSubject }),
	"approval_tools":          field(func(c *credvault.Connection) *[]string { return &c.ApprovalTools }),
	"approval_routes":         field(func(c *credvault.Connection) *[]string { return &c.ApprovalRoutes }),

	// Set by the MCP connect flow from the client's registration too.
	"oauth_token_endpoint_auth_method": field(func(c *credvault.Connection) *string { return &c.OAuthTokenAuthMethod }),

	"approval_subjects": approvalSubjects,
	// The MCP settings are the MCP engine's record, kept with the
	// connection as extensions; the vault's Extensions.Check validates
	// them.
	"mcp_endpoint":              extension[string]("mcp_endpoint"),
	"mcp_transport":             extension[string]("mcp_transport"),
	"mcp_tool_allowlist":        extension[[]string]("mcp_tool_allowlist"),
	"mcp_tool_denylist":         extension[[]string]("mcp_tool_denylist"),
	"mcp_subject_tool_policies": extension[map[string]toolPolicy]("mcp_subject_tool_policies"),
	"mcp_max_tools":             extension[int]("mcp_max_tools"),
	"mcp_expose_resources":      extension[bool]("mcp_expose_resources"),
	"mcp_expose_prompts":        extension[bool]("mcp_expose_prompts"),
}

// approvalSubjects writes approval_subjects. A member it does not know is
// refused rather than dropped: a misspelt "approval_route" would leave a
// payment the owner meant to hold unheld.
func approvalSubjects(c *credvault.Connection, raw json.RawMessage) error {
	var v map[string]approval.Rules
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		if _, typed := errors.AsType[*json.UnmarshalTypeError](err); typed {
			return err
		}
		return badRequest(`field approval_subjects maps each subject to {"approval_tools"?,"approval_routes"?}: `+err.Error()).
			With("field", "approval_subjects")
	}
	c.ApprovalSubjects = v
	return nil
}

// toolPolicy is the JSON form of one subject's entry in
// mcp_subject_tool_policies.
type toolPolicy struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// extension writes the JSON member name of a connection's extensions,
// once it decodes as a T: a null or a zero value (an empty list or
// object included) removes it, as clearing a field does.
func extension[T any](name string) fieldSetter {
	return func(c *credvault.Connection, raw json.RawMessage) error {
		var v T
		if !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			if err := json.Unmarshal(raw, &v); err != nil {
				return err
			}
		}
		enc, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if c.Extensions == nil {
			c.Extensions = map[string]json.RawMessage{}
		}
		switch string(enc) {
		case `""`, "0", "false", "null", "[]", "{}":
			delete(c.Extensions, name)
		default:
			c.Extensions[name] = enc
		}
		return nil
	}
}

// readOnlyFields may appear in a connection object but not in a write.
var readOnlyFields = []string{
	"credential_keys", "secret_version", "last_rotated_at", "next_rotation_due_at",
	"created_at", "updated_at", "last_test", "rotation_history", "mcp_discovery", "oauth_accounts",
}

// applyFields writes the fields of a JSON object into c, in a stable order.
// extra receives the fields it claims (returns true); others are refused.
func applyFields(c *credvault.Connection, obj map[string]json.RawMessage, extra func(name string, raw json.RawMessage) (bool, error)) error {
	names := make([]string, 0, len(obj))
	for name := range obj {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		raw := obj[name]
		if extra != nil {
			claimed, err := extra(name, raw)
			if err != nil {
				return err
			}
			if claimed {
				continue
			}
		}
		set, ok := writableFields[name]
		if !ok {
			if slices.Contains(readOnlyFields, name) || name == "id" || name == "secrets" {
				return badRequest("field "+name+" cannot be written here").With("field", name)
			}
			return badRequest("unknown field "+quoteName(name)).With("field", quoteName(name))
		}
		if err := set(c, raw); err != nil {
			if e, ok := errors.AsType[*apierror.Error](err); ok {
				return e
			}
			return badRequest("field "+name+" has the wrong JSON type").With("field", name)
		}
	}
	return nil
}

// quoteName bounds an attacker-chosen field name before it is echoed.
func quoteName(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// decodeObject decodes a JSON object keeping raw field values.
func decodeObject(body []byte) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := decodeStrict(body, &obj); err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, badRequest("request body must be a JSON object")
	}
	return obj, nil
}

// shown is a connection as the admin API shows it: without the fields of
// the auth modes it does not use. The vault keeps their defaults (a
// bearer connection stores auth_header_name X-API-Key) so that a later
// change of mode has them, but showing them would suggest they apply.
func shown(c *credvault.Connection) *credvault.Connection {
	v := *c
	if v.AuthMode != credvault.AuthHeaderKey {
		v.AuthHeaderName = ""
	}
	if v.AuthMode != credvault.AuthQueryParam {
		v.AuthQueryParam = ""
	}
	if v.AuthMode != credvault.AuthBearer && v.AuthMode != credvault.AuthHeaderKey {
		v.AuthPrefix = "" // only a header value carries a prefix
	}
	return &v
}

func shownAll(cs []*credvault.Connection) []*credvault.Connection {
	out := make([]*credvault.Connection, len(cs))
	for i, c := range cs {
		out[i] = shown(c)
	}
	return out
}
