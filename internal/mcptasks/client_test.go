package mcptasks_test

import (
	"encoding/json"
	"testing"

	"github.com/idnhq/idn/internal/mcptasks"
)

func initialize(version, caps string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","clientInfo":{"name":"x","version":"1"},"capabilities":` + caps + `}}`)
}

// What the server is told of a client's tasks capability: the parts
// that are relayed, each only where the client declared what it needs.
func TestDeclared(t *testing.T) {
	for _, tt := range []struct {
		name, version, caps, want string
	}{
		{"every part the relay carries", "2025-11-25", `{"sampling":{},"elicitation":{},"tasks":{"list":{},"cancel":{},"requests":{"sampling":{"createMessage":{}},"elicitation":{"create":{}}}}}`,
			`{"list":{},"cancel":{},"requests":{"sampling":{"createMessage":{}},"elicitation":{"create":{}}}}`},
		{"sampling as a task without sampling", "2025-11-25", `{"elicitation":{},"tasks":{"requests":{"sampling":{"createMessage":{}},"elicitation":{"create":{}}}}}`,
			`{"requests":{"elicitation":{"create":{}}}}`},
		{"a part the relay does not know", "2025-11-25", `{"sampling":{},"tasks":{"requests":{"sampling":{"createMessage":{}}},"futureThing":{}}}`,
			`{"requests":{"sampling":{"createMessage":{}}}}`},
		{"a version without tasks", "2025-06-18", `{"sampling":{},"tasks":{"list":{}}}`, "null"},
		{"no tasks capability", "2025-11-25", `{"sampling":{}}`, "null"},
		{"parts declared null", "2025-11-25", `{"sampling":null,"elicitation":{},"tasks":{"list":null,"cancel":{},"requests":{"sampling":{"createMessage":{}},"elicitation":{"create":null}}}}`, `{"cancel":{}}`},
		{"nothing the relay carries", "2025-11-25", `{"tasks":{"requests":{"sampling":{"createMessage":{}}}}}`, "null"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := json.Marshal(mcptasks.Declared(initialize(tt.version, tt.caps)))
			if string(got) != tt.want {
				t.Errorf("Declared = %s, want %s", got, tt.want)
			}
		})
	}
}

func FuzzDeclared(f *testing.F) {
	f.Add(initialize("2025-11-25", `{"sampling":{},"tasks":{"list":{},"requests":{"sampling":{"createMessage":{}}}}}`))
	f.Add([]byte(`{"params":{"protocolVersion":"2025-11-25","capabilities":{"tasks":{"requests":null}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c := mcptasks.Declared(body)
		if c == nil {
			return
		}
		if _, err := json.Marshal(c); err != nil {
			t.Fatal(err)
		}
	})
}
