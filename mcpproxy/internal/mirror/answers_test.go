package mirror_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/idnhq/idn/mcpproxy/internal/mirror"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// asked has a writes an elicitation/create with id on its session's
// stream, as the SDK's server writes it.
func asked(t testing.TB, a *mirror.Answers, id int) {
	t.Helper()
	w := a.Watch(httptest.NewRecorder())
	event := fmt.Sprintf("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"elicitation/create\",\"params\":{\"message\":\"m\"}}\n\n", id)
	if _, err := w.Write([]byte(event)); err != nil {
		t.Fatal(err)
	}
}

// claim is what the SDK, given body, would hand the relay: the
// stand-in's reading as an elicitation result, then Claim of it.
func claim(t testing.TB, a *mirror.Answers, body []byte) (string, bool) {
	t.Helper()
	var msg struct {
		Result *mcp.ElicitResult `json:"result"`
	}
	if err := json.Unmarshal(body, &msg); err != nil || msg.Result == nil {
		t.Fatalf("the SDK cannot read %s: %v", body, err)
	}
	raw, ok := a.Claim(msg.Result)
	return string(raw), ok
}

// An answer to an elicitation the agent was asked is kept as written, and
// the SDK given a stand-in; nothing else is taken, and no answer can be
// claimed that the agent did not give to a request it was asked.
func TestAnswers(t *testing.T) {
	t.Parallel()
	const answer = `{"action":"accept","content":{"z":1.50,"a":"x"}}`
	tests := []struct {
		name  string
		ask   []int  // ids of the elicitations written to the agent
		body  string // the agent's POST
		taken bool
	}{
		{"answer to an elicitation asked", []int{3}, `{"jsonrpc":"2.0","id":3,"result":` + answer + `}`, true},
		{"answer to a request never asked as an elicitation", []int{3}, `{"jsonrpc":"2.0","id":4,"result":` + answer + `}`, false},
		{"error answer", []int{3}, `{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}`, false},
		{"a request, not an answer", []int{3}, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, false},
		{"batch", []int{3}, `[{"jsonrpc":"2.0","id":3,"result":` + answer + `}]`, false},
		{"not JSON", []int{3}, `{"jsonrpc":`, false},
		{"nothing asked", nil, `{"jsonrpc":"2.0","id":3,"result":` + answer + `}`, false},
		{"flood of unanswered elicitations pushes the first out", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
			21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50,
			51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65}, `{"jsonrpc":"2.0","id":1,"result":` + answer + `}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var a mirror.Answers
			for _, id := range tt.ask {
				asked(t, &a, id)
			}
			stand, taken := a.Take([]byte(tt.body))
			if taken != tt.taken {
				t.Fatalf("taken = %v, want %v", taken, tt.taken)
			}
			if !taken {
				return
			}
			got, ok := claim(t, &a, stand)
			if !ok || got != answer {
				t.Errorf("claimed %q, %v; the agent wrote %s", got, ok, answer)
			}
			if _, ok := claim(t, &a, stand); ok {
				t.Error("an answer was claimed twice")
			}
			if _, again := a.Take([]byte(tt.body)); again {
				t.Error("a second answer to the same request was taken")
			}
		})
	}
}

// An agent that writes the stand-in itself, for an answer it never gave
// (or one already claimed), claims nothing: the SDK's reading of its
// answer stands.
func TestAnswersStandInForgedByTheAgent(t *testing.T) {
	t.Parallel()
	var a mirror.Answers
	forged := `{"jsonrpc":"2.0","id":9,"result":{"_meta":{"idn/answer":"9"}}}`
	if _, ok := claim(t, &a, []byte(forged)); ok {
		t.Error("a forged stand-in claimed an answer")
	}
	if _, ok := a.Claim(&mcp.ElicitResult{Action: "accept", Meta: mcp.Meta{"idn/answer": "9"}}); ok {
		t.Error("an answer with an action claimed a kept answer")
	}
}

func FuzzAnswersTake(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"action":"accept"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"1","result":{}}`))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var a mirror.Answers
		asked(t, &a, 1)
		stand, ok := a.Take(body)
		if !ok {
			return
		}
		if _, ok := claim(t, &a, stand); !ok {
			t.Errorf("the stand-in for %q claims nothing", body)
		}
	})
}
