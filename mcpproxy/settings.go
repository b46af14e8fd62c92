package mcpproxy

import (
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/idnhq/idn/mcpproxy/mcpsettings"
)

// A connection's MCP settings and its stored discovery are package
// mcpsettings'; these names keep them reachable from this package.
type (
	Settings        = mcpsettings.Settings
	SettingsError   = mcpsettings.Error
	Discovery       = mcpsettings.Discovery
	Tool            = mcpsettings.Tool
	ToolAnnotations = mcpsettings.ToolAnnotations
)

// TransportStreamableHTTP is the only MCP transport.
const TransportStreamableHTTP = mcpsettings.TransportStreamableHTTP

// DiscoveryMember is the member of a connection object that holds its last
// Discovery, maintained by the gateway and never written by a client.
const DiscoveryMember = mcpsettings.DiscoveryMember

// SecretRouteMembers is mcpsettings.SecretRouteMembers.
func SecretRouteMembers() []string { return mcpsettings.SecretRouteMembers() }

// DecodeSettings is mcpsettings.Decode.
func DecodeSettings(members map[string]json.RawMessage) (Settings, json.RawMessage, error) {
	return mcpsettings.Decode(members)
}

// ResolveEndpoint is the URL at which the proxy reaches a connection's
// MCP server: endpoint (mcp_endpoint) when it is a full http(s) URL, else
// joined to baseURL, its path appended and the queries merged. Whatever
// else names that server (an OAuth token's resource) must use it too.
func ResolveEndpoint(baseURL, endpoint string) (*url.URL, error) {
	u, err := upstream.ResolveEndpoint(baseURL, endpoint)
	if err != nil {
		return nil, fmt.Errorf("mcpproxy: invalid MCP endpoint: %w", err)
	}
	return u, nil
}
