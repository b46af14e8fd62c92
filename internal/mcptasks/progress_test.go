package mcptasks_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/idnhq/idn/internal/mcptasks"
)

func TestProgressToken(t *testing.T) {
	for _, tt := range []struct{ meta, want string }{
		{`{"progressToken":7}`, `7`},
		{`{"progressToken":"p"}`, `"p"`},
		{`{"progressToken":1.5}`, ``},
		{`{"progressToken":{"an":"object"}}`, ``},
		{`{"progressToken":null}`, ``},
		{`{}`, ``},
		{``, ``},
	} {
		if got := mcptasks.ProgressToken(json.RawMessage(tt.meta)); string(got) != tt.want {
			t.Errorf("ProgressToken(%s) = %s, want %s", tt.meta, got, tt.want)
		}
	}
}

// Progress is relayed under the client's token from the call until a
// status ends its task, or the call ends when it created none; under no
// other token.
func TestTokens(t *testing.T) {
	var tokens mcptasks.Tokens
	progress := func(token string) string {
		t.Helper()
		msg, err := tokens.Progress(json.RawMessage(`{"progressToken":`+token+`,"progress":1,"total":2,"message":"half","_meta":{"x":1}}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		return string(msg)
	}
	tokens.Track(json.RawMessage(`"idn-a"`), json.RawMessage(`7`))
	tokens.Track(json.RawMessage(`"idn-b"`), json.RawMessage(`"mine"`))
	if got := progress(`"idn-a"`); got != `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1,"total":2,"message":"half"}}` {
		t.Errorf("before the task: %s", got)
	}
	tokens.Created(json.RawMessage(`"idn-a"`), "task-1")
	tokens.Untrack(json.RawMessage(`"idn-a"`)) // a task was created: kept
	tokens.Untrack(json.RawMessage(`"idn-b"`)) // none was: its call ended
	tokens.Status(json.RawMessage(`{"taskId":"task-1","status":"working"}`))
	for _, tt := range []struct{ name, token, want string }{
		{"the token of a running task, spelt otherwise", `"idn-\u0061"`, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1,"total":2,"message":"half"}}`},
		{"a token no call was given", `"idn-c"`, ``},
		{"the client's own token, never passed on", `7`, ``},
		{"the token of a call that created no task, after it", `"idn-b"`, ``},
	} {
		if got := progress(tt.token); got != tt.want {
			t.Errorf("%s: %s, want %q", tt.name, got, tt.want)
		}
	}
	for _, end := range []string{"completed", "failed", "cancelled"} {
		tokens.Track(json.RawMessage(`"idn-`+end+`"`), json.RawMessage(`1`))
		tokens.Created(json.RawMessage(`"idn-`+end+`"`), end)
		tokens.Status(json.RawMessage(`{"taskId":"` + end + `","status":"` + end + `"}`))
		if got := progress(`"idn-` + end + `"`); got != "" || tokens.Tracks(json.RawMessage(`"idn-`+end+`"`)) {
			t.Errorf("progress of a task %s: %s", end, got)
		}
	}
	// Past MaxTokens, the oldest is forgotten.
	for i := range mcptasks.MaxTokens {
		tokens.Track(json.RawMessage(strconv.Itoa(i)), json.RawMessage(`1`))
	}
	if tokens.Tracks(json.RawMessage(`"idn-a"`)) || !tokens.Tracks(json.RawMessage(`0`)) {
		t.Error("the oldest token was not the one forgotten")
	}
}
