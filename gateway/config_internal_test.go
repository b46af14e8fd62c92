package gateway

import (
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/idnhq/idn/proxy"
)

// TestWithDefaults: the fields the gateway itself defaults, from the zero
// Config and with the parts' settings it shares between them.
func TestWithDefaults(t *testing.T) {
	t.Parallel()
	key, err := credvault.GenerateMasterKey()
	if err != nil {
		t.Fatal(err)
	}
	base := Config{DataDir: t.TempDir(), MasterKey: key, ControlPlaneURL: "http://cp.example/"}
	zero, err := base.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	shared := base
	shared.Proxy = proxy.Options{MaxBodyBytes: 1 << 20, MCPTimeout: 7 * time.Second}
	followed, err := shared.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	own := shared
	own.MCP = mcpproxy.Options{MaxBodyBytes: 2 << 20, Timeout: 9 * time.Second}
	kept, err := own.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		field     string
		got, want any
	}{
		{"ControlPlaneURL", zero.ControlPlaneURL, "http://cp.example"},
		{"Namespace", zero.Namespace, "gateway"},
		{"AdminTimeout", zero.AdminTimeout, 20 * time.Second},
		{"Proxy.MaxBodyBytes", zero.Proxy.MaxBodyBytes, int64(proxy.DefaultMaxBodyBytes)},
		{"Proxy.MaxInflightBodyBytes", zero.Proxy.MaxInflightBodyBytes, int64(proxy.DefaultMaxInflightBodyBytes)},
		{"MCP.MaxBodyBytes follows Proxy.MaxBodyBytes", followed.MCP.MaxBodyBytes, int64(1 << 20)},
		{"MCP.Timeout follows Proxy.MCPTimeout", followed.MCP.Timeout, 7 * time.Second},
		{"MCP.MaxBodyBytes set is kept", kept.MCP.MaxBodyBytes, int64(2 << 20)},
		{"MCP.Timeout set is kept", kept.MCP.Timeout, 9 * time.Second},
		{"InsecureUnsignedAdminChecks", zero.InsecureUnsignedAdminChecks, false},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.field, tt.got, tt.want)
		}
	}
}
