package mcpproxy

import (
	"encoding/json"

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
