// Package mcpsettings is the MCP configuration of a gateway connection:
// the mcp_* members of the connection object (endpoint, transport, tool
// policy, what the MCP endpoint exposes), read from and written to the
// members a store keeps, and checked. Settings.Policy is the connection's
// toolpolicy.Policy. Discovery is what the gateway last learned of the
// connection's server (mcp_discovery), kept beside the settings.
package mcpsettings

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/idnhq/idn/identity/display"
	"github.com/idnhq/idn/mcpproxy/toolpolicy"
)

// Settings is the MCP configuration of a connection, the record the
// gateway keeps with the connection and its admin API shows among the
// connection's fields (the mcp_* members; mcp_discovery, the last
// Discovery, is kept beside it).
type Settings struct {
	// Endpoint is the MCP endpoint: a path under the connection's base
	// URL, or an absolute http(s) URL. Empty means the base URL itself.
	Endpoint string `json:"mcp_endpoint,omitempty"`
	// Transport is TransportStreamableHTTP, the only one; Normalize sets
	// it (and replaces its synonym "http").
	Transport           string                              `json:"mcp_transport,omitempty"`
	ToolAllowlist       []string                            `json:"mcp_tool_allowlist,omitempty"`
	ToolDenylist        []string                            `json:"mcp_tool_denylist,omitempty"`
	SubjectToolPolicies map[string]toolpolicy.SubjectPolicy `json:"mcp_subject_tool_policies,omitempty"`
	MaxTools            int                                 `json:"mcp_max_tools,omitempty"`
	// ExposeResources and ExposePrompts let the upstream's resources and
	// prompts through the MCP endpoint. Off by default: tools pass the
	// tool policy, while resources and prompts have no policy of their own.
	ExposeResources bool `json:"mcp_expose_resources,omitempty"`
	ExposePrompts   bool `json:"mcp_expose_prompts,omitempty"`
}

// TransportStreamableHTTP is the only MCP transport.
const TransportStreamableHTTP = "streamable_http"

// DiscoveryMember is the member of a connection object that holds its last
// Discovery, maintained by the gateway and never written by a client.
const DiscoveryMember = "mcp_discovery"

// Size limits of Settings and of a stored Discovery.
const (
	maxToolNames      = 1000
	maxToolNameLen    = 256
	maxSubjectLen     = 256
	maxEndpointLen    = 2048
	maxDiscoveryBytes = 4 << 20
)

// Error says which member of a connection's MCP settings is wrong
// and why.
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string { return "mcpproxy: " + e.Field + " " + e.Message }

func invalid(field, format string, args ...any) error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...)}
}

// settingsMembers returns the JSON names of the members Settings holds,
// in order.
func settingsMembers() []string {
	return []string{"mcp_endpoint", "mcp_transport", "mcp_tool_allowlist", "mcp_tool_denylist",
		"mcp_subject_tool_policies", "mcp_max_tools", "mcp_expose_resources", "mcp_expose_prompts"}
}

// SecretRouteMembers are the members that decide where a connection's
// credential is sent: whoever may change them can hand it to any host.
func SecretRouteMembers() []string { return []string{"mcp_endpoint", "mcp_transport"} }

// Decode reads the Settings and the stored discovery from the MCP
// members of a connection object. Members of other names, a member of the
// wrong JSON type and a discovery over 4 MiB are refused with an
// *Error.
func Decode(members map[string]json.RawMessage) (Settings, json.RawMessage, error) {
	var s Settings
	var discovery json.RawMessage
	obj := make(map[string]json.RawMessage, len(members))
	for name, raw := range members {
		switch {
		case name == DiscoveryMember:
			if len(raw) > maxDiscoveryBytes {
				return Settings{}, nil, invalid(name, "is larger than %d bytes", maxDiscoveryBytes)
			}
			discovery = raw
		case slices.Contains(settingsMembers(), name):
			obj[name] = raw
			if err := json.Unmarshal(raw, new(any)); err != nil {
				return Settings{}, nil, invalid(name, "is not JSON")
			}
		default:
			return Settings{}, nil, invalid(name, "is not a field of a connection")
		}
	}
	raw, _ := json.Marshal(obj)
	if err := json.Unmarshal(raw, &s); err != nil {
		field := "mcp settings"
		if te, ok := err.(*json.UnmarshalTypeError); ok && te.Field != "" {
			field, _, _ = strings.Cut(te.Field, ".")
		}
		return Settings{}, nil, invalid(field, "has the wrong JSON type")
	}
	return s, discovery, nil
}

// Members returns s as the members of a connection object, each set
// member once, none for a zero field.
func (s Settings) Members() map[string]json.RawMessage {
	raw, _ := json.Marshal(s)
	var out map[string]json.RawMessage
	_ = json.Unmarshal(raw, &out)
	return out
}

// Normalize sets the default transport of an MCP connection.
func (s *Settings) Normalize() {
	if s.Transport == "" || s.Transport == "http" {
		s.Transport = TransportStreamableHTTP
	}
}

// IsZero reports whether s sets nothing.
func (s Settings) IsZero() bool { return len(s.Members()) == 0 }

// Check validates normalized settings. An absolute Endpoint is checked for
// its form here (no control or hiding characters); whether it is an
// acceptable upstream URL is the caller's to check.
func (s Settings) Check() error {
	if s.Transport != TransportStreamableHTTP {
		return invalid("mcp_transport", "must be %q (or its synonym \"http\")", TransportStreamableHTTP)
	}
	if e := s.Endpoint; e != "" {
		if err := display.Check(e); err != nil {
			return invalid("mcp_endpoint", "%v", err)
		}
		if strings.HasPrefix(e, "/") && (len(e) > maxEndpointLen || strings.ContainsAny(e, "#\\") || hasDotSegment(e) || hasControl(e)) {
			return invalid("mcp_endpoint", "must be a clean absolute path or an http(s) URL")
		}
	}
	if err := checkToolNames("mcp_tool_allowlist", s.ToolAllowlist); err != nil {
		return err
	}
	if err := checkToolNames("mcp_tool_denylist", s.ToolDenylist); err != nil {
		return err
	}
	if len(s.SubjectToolPolicies) > maxToolNames {
		return invalid("mcp_subject_tool_policies", "has more than %d subjects", maxToolNames)
	}
	for subject, p := range s.SubjectToolPolicies {
		if subject == "" || len(subject) > maxSubjectLen || hasControl(subject) {
			return invalid("mcp_subject_tool_policies", "subjects must be 1-%d bytes without control characters", maxSubjectLen)
		}
		if err := display.Check(subject); err != nil {
			return invalid("mcp_subject_tool_policies", "a subject %v", err)
		}
		if err := checkToolNames("mcp_subject_tool_policies", slices.Concat(p.Allow, p.Deny)); err != nil {
			return err
		}
	}
	if s.MaxTools < 0 {
		return invalid("mcp_max_tools", "must not be negative (0 means no cap)")
	}
	return nil
}

// Policy is the tool policy of s.
func (s Settings) Policy() toolpolicy.Policy {
	p := toolpolicy.Policy{Allow: s.ToolAllowlist, Deny: s.ToolDenylist, MaxTools: s.MaxTools}
	if len(s.SubjectToolPolicies) > 0 {
		p.Subjects = s.SubjectToolPolicies
	}
	return p
}

func checkToolNames(field string, names []string) error {
	if len(names) > maxToolNames {
		return invalid(field, "has more than %d entries", maxToolNames)
	}
	for _, n := range names {
		if n == "" || len(n) > maxToolNameLen || hasControl(n) {
			return invalid(field, "tool names must be 1-%d bytes without control characters", maxToolNameLen)
		}
		if err := display.Check(n); err != nil {
			return invalid(field, "a tool name %v", err)
		}
	}
	return nil
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

func hasDotSegment(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}
