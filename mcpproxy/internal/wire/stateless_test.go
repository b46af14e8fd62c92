package wire_test

import (
	"encoding/json"
	"testing"

	"github.com/idnhq/idn/mcpproxy/internal/wire"
)

// What the stateless fast path takes is a single first tools/call of the
// revision, with a name, an id, the revision's _meta and nothing that
// needs a stream or an earlier round.
func FuzzClassifyStateless(f *testing.F) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a.echo","arguments":{"text":"hi"},` + meta + `}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a.echo","requestState":"s",` + meta + `}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":1}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{` + meta + `}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, ok := wire.ClassifyStateless(body)
		if !ok {
			return
		}
		var probe struct {
			Method string `json:"method"`
			Params struct {
				Name         string                     `json:"name"`
				RequestState *string                    `json:"requestState"`
				Meta         map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		if err := json.Unmarshal(body, &probe); err != nil {
			t.Fatalf("taken, but not JSON: %s", body)
		}
		_, token := probe.Params.Meta["progressToken"]
		switch {
		case probe.Method != "tools/call" || m.Call == nil || m.Call.Name == "" || m.Call.Name != probe.Params.Name:
			t.Fatalf("taken as a call of %q: %s", m.Call.Name, body)
		case token || probe.Params.RequestState != nil:
			t.Fatalf("taken with a progress token or a requestState: %s", body)
		case string(probe.Params.Meta["io.modelcontextprotocol/protocolVersion"]) != `"2026-07-28"`:
			t.Fatalf("taken without the revision: %s", body)
		}
		if key, ok := wire.IDKey(m.ID); !ok || key != m.Key {
			t.Fatalf("call id %s keyed %q", m.ID, m.Key)
		}
	})
}
