package mcpsettings

import (
	"encoding/json"
	"time"
)

// Discovery is the result of tool discovery for one connection: the
// connection's mcp_discovery object. The gateway stores it as opaque JSON
// (mcpproxy's Config.OnDiscovery) and hands it back in the mcpproxy
// Connection's Discovery to seed the cache after a restart.
type Discovery struct {
	ServerName      string `json:"server_name,omitempty"`
	ServerVersion   string `json:"server_version,omitempty"`
	ProtocolVersion string `json:"protocol_version,omitempty"`
	Tools           []Tool `json:"tools"`
	// DiscoveredAt is the time of the last successful discovery; zero when
	// discovery never succeeded.
	DiscoveredAt time.Time `json:"discovered_at,omitzero"`
	// LastError is the last failed discovery's error, scrubbed of secrets;
	// empty when the last attempt succeeded.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// Tool is one discovered tool.
type Tool struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// InputSchema is the tool's JSON Schema for its arguments, a JSON object.
	InputSchema json.RawMessage `json:"input_schema"`
	// OutputSchema is the JSON Schema of the tool's structured result;
	// empty when the server gave none.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Annotations are the server's hints; nil when it gave none.
	Annotations *ToolAnnotations `json:"annotations,omitempty"`
}

// ToolAnnotations are a tool's hints as its server declared them (MCP's
// ToolAnnotations; an absent destructive or open-world hint is nil, which
// MCP reads as true): its word, which the tool policy never reads.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    bool   `json:"read_only_hint"`
	DestructiveHint *bool  `json:"destructive_hint,omitempty"`
	IdempotentHint  bool   `json:"idempotent_hint"`
	OpenWorldHint   *bool  `json:"open_world_hint,omitempty"`
}
