package tasks_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/idnhq/idn/mcpproxy/internal/scrub"
	"github.com/idnhq/idn/mcpproxy/internal/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func offering(b *tasks.Book, caps string) {
	var c mcptasks.Caps
	if err := json.Unmarshal([]byte(caps), &c); err != nil {
		panic(err)
	}
	b.SetOffer(&mcptasks.Offer{Caps: &c, Version: mcptasks.Version})
}

// A session reaches only the tasks it owns, and only through methods the
// server offers.
func TestBookForward(t *testing.T) {
	var b tasks.Book
	offering(&b, `{"list":{},"requests":{"tools":{"call":{}}}}`)
	b.Own("mine", "")
	for _, tt := range []struct {
		name, method string
		params       *mcptasks.Params
		want         string
	}{
		{"its own task", "tasks/get", &mcptasks.Params{TaskID: "mine"}, `{"taskId":"mine"}`},
		{"a task it learned the id of", "tasks/result", &mcptasks.Params{TaskID: "theirs"}, "Failed to retrieve task: Task not found"},
		{"no task at all", "tasks/get", nil, "Failed to retrieve task: Task not found"},
		{"a page of its tasks", "tasks/list", &mcptasks.Params{Cursor: "c"}, `{"cursor":"c"}`},
		{"a method the server does not offer", "tasks/cancel", &mcptasks.Params{TaskID: "mine"}, "mcpproxy: tasks/cancel is not offered on this connection"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			params, err := b.Forward(tt.method, tt.params)
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				raw, _ := json.Marshal(params)
				got = string(raw)
			}
			if got != tt.want {
				t.Errorf("Forward = %s, want %s", got, tt.want)
			}
		})
	}
	list, err := b.OwnList(json.RawMessage(`{"tasks":[{"taskId":"theirs"},{"taskId":"mine","status":"working"}],"nextCursor":"n"}`))
	if err != nil || string(list) != `{"nextCursor":"n","tasks":[{"taskId":"mine","status":"working"}]}` {
		t.Errorf("OwnList = %s, %v", list, err)
	}
}

// A session's memory of tasks is bounded: the oldest task is forgotten,
// the oldest early notification dropped.
func TestBookBounds(t *testing.T) {
	var b tasks.Book
	for i := range tasks.MaxOwned + 1 {
		b.Own(fmt.Sprint(i), "")
	}
	if b.Owns("0") || !b.Owns("1") || !b.Owns(fmt.Sprint(tasks.MaxOwned)) {
		t.Error("the oldest task was not the one forgotten")
	}
	dropped := 0
	for i := range tasks.MaxEarly + 1 {
		if d, held := b.Hold(fmt.Sprint("early-", i), json.RawMessage(`{}`)); d {
			dropped++
		} else if !held {
			t.Fatal("a notification about a task not owned was not held")
		}
	}
	if dropped != 1 || len(b.Own("early-0", "")) != 0 || len(b.Own("early-1", "")) != 1 {
		t.Errorf("dropped %d; the oldest held notification should be the one dropped", dropped)
	}
	if _, held := b.Hold(fmt.Sprint(tasks.MaxOwned), nil); held {
		t.Error("a notification about an owned task was held")
	}
}

// A progress notification reaches the agent under its own token when its
// token is one the session's task-augmented call was passed on with,
// until the task ends; any other token is dropped, as is the progress of
// a call that created no task.
func TestBookProgress(t *testing.T) {
	var b tasks.Book
	sc := scrub.New(nil, []string{"s3cret"})
	token := b.Track(json.RawMessage(`{"progressToken":42}`))
	if token == "" || token == "42" || b.Track(json.RawMessage(`{"progressToken":{"an":"object"}}`)) != "" || b.Track(nil) != "" {
		t.Fatalf("Track minted %q", token)
	}
	b.Own("t1", token)
	progress := func(token string) string {
		msg, dropped, err := b.Note(sc, mcptasks.ProgressMethod, json.RawMessage(`{"progressToken":"`+token+`","progress":1,"total":2,"message":"key s3cret","_meta":{"x":1}}`))
		if err != nil || (msg == nil) != dropped {
			t.Fatalf("Note = %s, %v, %v", msg, dropped, err)
		}
		return string(msg)
	}
	if got := progress(token); got != `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":42,"progress":1,"total":2,"message":"key [redacted]"}}` {
		t.Errorf("the session's own progress: %s", got)
	}
	for _, tt := range []struct{ name, token string }{
		{"progress under the agent's own token, which never went upstream", "42"},
		{"progress under another session's token", "idn-someone-else"},
	} {
		if got := progress(tt.token); got != "" {
			t.Errorf("%s: relayed %s", tt.name, got)
		}
	}
	if msg, _, _ := b.Note(sc, mcptasks.StatusMethod, json.RawMessage(`{"taskId":"t1","status":"completed"}`)); msg == nil {
		t.Error("the task's terminal status was not relayed")
	}
	if got := progress(token); got != "" {
		t.Errorf("progress after the task ended: %s", got)
	}
	plain := b.Track(json.RawMessage(`{"progressToken":"p"}`))
	b.Untrack(plain)
	if got := progress(plain); got != "" {
		t.Errorf("progress of a call that created no task, after it: %s", got)
	}
}

// FuzzParseTools reads arbitrary tools/list results: no panic, and what
// Keep keeps of a page it read is a page it reads again, with those tools.
func FuzzParseTools(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"a","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}},{"name":"b","inputSchema":{"type":"object"}}],"nextCursor":"x"}`))
	f.Add([]byte(`{"tools":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		page, err := tasks.ParseTools(raw)
		if err != nil {
			return
		}
		kept, err := page.Keep(func(tool *mcp.Tool) bool { return tool.Name != "b" })
		if err != nil {
			return
		}
		again, err := tasks.ParseTools(kept)
		if err != nil {
			t.Fatalf("kept %s of %s: %v", kept, raw, err)
		}
		for _, tool := range again.Tools {
			if tool.Name == "b" {
				t.Fatalf("kept %s", kept)
			}
		}
	})
}
