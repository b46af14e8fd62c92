package relay

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/idnhq/idn/mcpproxy/toolpolicy"
)

func TestCheckRouting(t *testing.T) {
	t.Parallel()
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a.echo","arguments":{}}}`
	read := `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}`
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, c := range []struct {
		name    string
		headers []string // name, value pairs
		body    string
		refused bool
	}{
		{"no headers", nil, call, false},
		{"matching call", []string{"Mcp-Method", "tools/call", "Mcp-Name", "a.echo"}, call, false},
		{"matching read", []string{"Mcp-Method", "resources/read", "Mcp-Name", "file:///a"}, read, false},
		{"matching list", []string{"Mcp-Method", "tools/list"}, list, false},
		{"signed tool swapped in the body", []string{"Mcp-Method", "tools/call", "Mcp-Name", "a.harmless"}, call, true},
		{"signed method swapped in the body", []string{"Mcp-Method", "tools/list"}, call, true},
		{"name left out to dodge the check", []string{"Mcp-Method", "tools/call"}, call, true},
		{"name on a method without a target", []string{"Mcp-Method", "tools/list", "Mcp-Name", "a.echo"}, list, true},
		{"matching subscribe", []string{"Mcp-Method", "resources/subscribe", "Mcp-Name", "file:///a"}, `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///a"}}`, false},
		{"subscribe to another resource than signed", []string{"Mcp-Method", "resources/subscribe", "Mcp-Name", "file:///a"}, `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///b"}}`, true},
		{"header repeated to confuse", []string{"Mcp-Method", "tools/call", "Mcp-Name", "a.echo", "Mcp-Name", "a.echo"}, call, true},
		{"batch hiding a second call", []string{"Mcp-Method", "tools/call", "Mcp-Name", "a.echo"}, "[" + call + "]", true},
		{"name repeated, the second unsigned", []string{"Mcp-Method", "tools/call", "Mcp-Name", "a.echo"}, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a.echo","name":"a.harmless"}}`, true},
		// The SDK reads names exactly: "Name" is not the tool it calls.
		{"name in another case beside it", []string{"Mcp-Method", "tools/call", "Mcp-Name", "a.echo"}, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a.echo","Name":"a.harmless"}}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i < len(c.headers); i += 2 {
				h.Add(c.headers[i], c.headers[i+1])
			}
			err := checkRouting(h, wire.Peek([]byte(c.body)))
			if (err != nil) != c.refused {
				t.Fatalf("checkRouting = %v, refused want %v", err, c.refused)
			}
			if err != nil && err.Code() != errcode.MCPHeaderMismatch {
				t.Errorf("code %s, want MCP_HEADER_MISMATCH", err.Code())
			}
		})
	}
}

// The tool policy could decide a tools/call from its signed Mcp-Name
// before the body is parsed. These measure what that saves: the decision
// from the header alone, against parsing a typical call's body first.
func benchmarkBody() []byte {
	args := map[string]any{"text": strings.Repeat("lorem ipsum ", 80), "count": 3, "tags": []string{"a", "b", "c"}}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{
		"name": "a.echo", "arguments": args,
		"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}},
	}})
	return body
}

var benchPolicy = toolpolicy.Policy{Allow: []string{"a.*"}, Deny: []string{"a.admin*"}}

func BenchmarkPolicyFromHeaders(b *testing.B) {
	h := http.Header{"Mcp-Method": {"tools/call"}, "Mcp-Name": {"a.echo"}}
	for b.Loop() {
		if h.Get("Mcp-Method") == "tools/call" && !benchPolicy.Explain("agent", h.Get("Mcp-Name"), nil).Allowed {
			b.Fatal("denied")
		}
	}
}

func BenchmarkPolicyFromBody(b *testing.B) {
	body := benchmarkBody()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if err := json.Unmarshal(body, &msg); err != nil || !benchPolicy.Explain("agent", msg.Params.Name, nil).Allowed {
			b.Fatal("denied")
		}
	}
}

// The check itself, which every request carrying the headers pays.
func BenchmarkCheckRouting(b *testing.B) {
	body := benchmarkBody()
	h := http.Header{"Mcp-Method": {"tools/call"}, "Mcp-Name": {"a.echo"}}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := checkRouting(h, wire.Peek(body)); err != nil {
			b.Fatal(err)
		}
	}
}

// checkRouting passes a message only when its headers name what it is:
// every body it passes under headers carries that method and target.
func FuzzCheckRouting(f *testing.F) {
	f.Add("tools/call", "a.echo", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a.echo"}}`))
	f.Add("resources/read", "file:///a", []byte(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}`))
	f.Add("tools/list", "", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	f.Add("tools/call", "a", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`))
	f.Fuzz(func(t *testing.T, method, name string, body []byte) {
		h := http.Header{}
		if method != "" {
			h.Set("Mcp-Method", method)
		}
		if name != "" {
			h.Set("Mcp-Name", name)
		}
		if checkRouting(h, wire.Peek(body)) != nil || method == "" {
			return
		}
		// As the SDK reads a message: names exactly. (A name repeated is
		// refused, so the last one is the only one.)
		var msg struct {
			Method string                     `json:"method"`
			Params map[string]json.RawMessage `json:"params"`
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil || json.Unmarshal(top["method"], &msg.Method) != nil || msg.Method != h.Get("Mcp-Method") {
			t.Fatalf("passed %q over %s", method, body)
		}
		_ = json.Unmarshal(top["params"], &msg.Params)
		var target, uri string
		_ = json.Unmarshal(msg.Params["name"], &target)
		_ = json.Unmarshal(msg.Params["uri"], &uri)
		if msg.Method == "resources/read" || target == "" && !routedByName[msg.Method] {
			target = uri
		}
		if (routedByName[msg.Method] || name != "") && target != h.Get("Mcp-Name") {
			t.Fatalf("passed Mcp-Name %q over %s", h.Get("Mcp-Name"), body)
		}
	})
}
