package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/mcpproxy"
)

// A request that did not pass the proxy's pipeline is refused by the MCP
// engine's caller hook, with a code.
func TestMCPCallerRequiresPipeline(t *testing.T) {
	t.Parallel()
	_, err := mcpCaller(httptest.NewRequest("GET", "/mcp/x/tools", nil))
	var coded interface{ Code() errcode.Code }
	if !errors.As(err, &coded) || coded.Code() != errcode.AuthForbidden {
		t.Fatalf("mcpCaller accepted, or refused without AUTH_FORBIDDEN, a request that bypassed the pipeline: %v", err)
	}
}

// mcpVault is a vault with the gateway's extensions.
func mcpVault(t *testing.T) *credvault.Vault {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), sqlitestore.DefaultFileName))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := credvault.GenerateMasterKey()
	v, err := credvault.New(context.Background(), credvault.Config{Store: st, MasterKey: key, PollInterval: -1, Extensions: VaultExtensions()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close(); _ = st.Close() })
	return v
}

// members encodes MCP members for a connection's extensions.
func members(t *testing.T, obj string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(obj), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The vault checks a connection's MCP settings as mcpproxy defines them,
// naming the member at fault.
func TestVaultChecksMCPSettings(t *testing.T) {
	t.Parallel()
	v := mcpVault(t)
	for _, tt := range []struct {
		name, protocol, members, field string
	}{
		{"mcp_fields_on_http", credvault.ProtocolHTTP, `{"mcp_tool_allowlist":["a"]}`, "protocol"},
		{"mcp_expose_resources_on_http", credvault.ProtocolHTTP, `{"mcp_expose_resources":true}`, "protocol"},
		{"mcp_expose_prompts_on_http", credvault.ProtocolHTTP, `{"mcp_expose_prompts":true}`, "protocol"},
		{"mcp_bad_transport", credvault.ProtocolMCP, `{"mcp_transport":"sse"}`, "mcp_transport"},
		{"mcp_policy_subject_bidi_isolate", credvault.ProtocolMCP, `{"mcp_subject_tool_policies":{"alice\u2066":{"allow":["a"]}}}`, "mcp_subject_tool_policies"},
		{"mcp_tool_name_zero_width_joiner", credvault.ProtocolMCP, `{"mcp_tool_denylist":["admin\u200d.*"]}`, "mcp_tool_denylist"},
		{"mcp_endpoint_userinfo_credential_leak", credvault.ProtocolMCP, `{"mcp_endpoint":"https://user:pw@evil.example/mcp"}`, "mcp_endpoint"},
		{"mcp_endpoint_path_climbs_out", credvault.ProtocolMCP, `{"mcp_endpoint":"/v1/../admin"}`, "mcp_endpoint"},
		{"mcp_endpoint_right_to_left_override", credvault.ProtocolMCP, `{"mcp_endpoint":"/mcp\u202e"}`, "mcp_endpoint"},
		{"mcp_max_tools_negative", credvault.ProtocolMCP, `{"mcp_max_tools":-1}`, "mcp_max_tools"},
		{"mcp_max_tools_wrong_type", credvault.ProtocolMCP, `{"mcp_max_tools":"many"}`, "mcp_max_tools"},
		{"unknown_member_smuggled", credvault.ProtocolMCP, `{"mcp_bogus":1}`, "mcp_bogus"},
		{"mcp_discovery_over_4_mib_fills_the_store", credvault.ProtocolMCP, `{"mcp_discovery":"` + strings.Repeat("x", 4<<20) + `"}`, "mcp_discovery"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &credvault.Connection{ID: "m", Protocol: tt.protocol, BaseURL: "https://mcp.example", AuthMode: credvault.AuthBearer,
				AuthSecretKey: "token", Extensions: members(t, tt.members)}
			err := v.ValidateConnection(c, map[string]string{"token": "tok-secret-1"})
			var ve *credvault.ValidationError
			if !errors.As(err, &ve) || ve.Field != tt.field {
				t.Fatalf("err = %v, want field %s", err, tt.field)
			}
		})
	}
}

// What the vault stores of an MCP connection reaches mcpproxy: endpoint,
// policy, exposure and the last discovery, with the transport defaulted;
// a changed setting applies at the next lookup.
func TestMCPConnectionFromTheVault(t *testing.T) {
	t.Parallel()
	v := mcpVault(t)
	ctx := context.Background()
	discovery, _ := json.Marshal(mcpproxy.Discovery{ServerName: "tools", Tools: []mcpproxy.Tool{}})
	c := &credvault.Connection{ID: "m", Protocol: credvault.ProtocolMCP, BaseURL: "https://mcp.example",
		Extensions: members(t, `{"mcp_endpoint":"/mcp","mcp_tool_allowlist":["a.*"],"mcp_subject_tool_policies":{"bot":{"deny":["a.x"]}},
			"mcp_max_tools":3,"mcp_expose_prompts":true}`)}
	stored, err := v.Create(ctx, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(stored.Extensions["mcp_transport"]); got != `"streamable_http"` {
		t.Errorf("mcp_transport = %s", got)
	}
	if _, err := v.Update(ctx, "m", func(c *credvault.Connection) error {
		c.Extensions[mcpproxy.DiscoveryMember] = discovery
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	src := &mcpConnections{vault: v}
	mc, err := src.MCPConnection(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	want := mcpproxy.Policy{Allow: []string{"a.*"}, MaxTools: 3, Subjects: map[string]mcpproxy.SubjectPolicy{"bot": {Deny: []string{"a.x"}}}}
	if diff := cmp.Diff(want, mc.Policy); diff != "" || mc.Endpoint != "/mcp" || !mc.ExposePrompts || mc.ExposeResources || string(mc.Discovery) != string(discovery) {
		t.Errorf("connection %+v, policy diff %s", mc, diff)
	}
	if _, err := v.Update(ctx, "m", func(c *credvault.Connection) error {
		c.Extensions["mcp_tool_denylist"] = json.RawMessage(`["a.y"]`)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if mc, _ := src.MCPConnection(ctx, "m"); fmt.Sprint(mc.Policy.Deny) != "[a.y]" {
		t.Errorf("after a change, deny = %v", mc.Policy.Deny)
	}
}

// The credential goes to the base URL's host and to an MCP connection's
// absolute endpoint, nowhere else.
func TestCredentialGoesToTheMCPEndpoint(t *testing.T) {
	t.Parallel()
	got := make(chan string, 2)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Get("Authorization") }))
	defer endpoint.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Get("Authorization") }))
	defer other.Close()
	v := mcpVault(t)
	endpointJSON, _ := json.Marshal(endpoint.URL + "/mcp")
	if _, err := v.Create(context.Background(), &credvault.Connection{ID: "m", Protocol: credvault.ProtocolMCP, BaseURL: "https://mcp.example",
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token", Extensions: map[string]json.RawMessage{"mcp_endpoint": endpointJSON}},
		map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: v.Transport("m", nil)}
	resp, err := client.Get(endpoint.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if auth := <-got; auth != "Bearer tok-secret-1" {
		t.Errorf("the endpoint received %q", auth)
	}
	if _, err := client.Get(other.URL + "/mcp"); !errors.Is(err, credvault.ErrCredentialDestination) {
		t.Errorf("a request to another host: %v", err)
	}
}

// Moving an MCP connection's endpoint is a change of where its credential
// goes; spelling its transport's default differently is no change.
func TestMCPEndpointIsPartOfTheSecretRoute(t *testing.T) {
	t.Parallel()
	v := mcpVault(t)
	before := &credvault.Connection{ID: "m", Protocol: credvault.ProtocolMCP, BaseURL: "https://mcp.example",
		Extensions: members(t, `{"mcp_endpoint":"/mcp","mcp_transport":"streamable_http"}`)}
	moved := before.Clone()
	moved.Extensions["mcp_endpoint"] = json.RawMessage(`"http://127.0.0.1:9/mcp"`)
	synonym := before.Clone()
	synonym.Extensions["mcp_transport"] = json.RawMessage(`"http"`)
	if got := v.SecretRouteChanges(before, moved); fmt.Sprint(got) != "[mcp_endpoint]" {
		t.Errorf("moved endpoint: %v", got)
	}
	if got := v.SecretRouteChanges(before, synonym); len(got) != 0 {
		t.Errorf("transport synonym: %v", got)
	}
}
