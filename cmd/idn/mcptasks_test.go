package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/mcptasks/mcptaskstest"
)

// stdioClient speaks MCP to idn mcp as JSON lines, as a desktop client
// does: the go-sdk's client has no model of tasks. It answers the
// bridge's pings itself.
type stdioClient struct {
	t      *testing.T
	mu     sync.Mutex
	in     io.Writer
	msgs   chan map[string]json.RawMessage
	stderr *bytes.Buffer
}

// taskClient runs idn mcp and initializes it as a client of protocol
// version 2025-11-25, to which the gateway offers tasks.
func (st *mcpStack) taskClient(t *testing.T) *stdioClient {
	t.Helper()
	in, out, stderr := st.start(t)
	c := &stdioClient{t: t, in: in, msgs: make(chan map[string]json.RawMessage, 64), stderr: stderr}
	go func() {
		defer close(c.msgs)
		dec := json.NewDecoder(out)
		for {
			var m map[string]json.RawMessage
			if dec.Decode(&m) != nil {
				return
			}
			if string(m["method"]) == `"ping"` {
				c.send(`{"jsonrpc":"2.0","id":` + string(m["id"]) + `,"result":{}}`)
				continue
			}
			c.msgs <- m
		}
	}()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := c.next("the answer to initialize"); string(m["id"]) != "1" || !strings.Contains(string(m["result"]), `"tasks"`) {
		t.Fatalf("initialize answered %s", m)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

func (c *stdioClient) send(msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = io.WriteString(c.in, msg+"\n")
}

// next is the next message idn mcp writes, other than a ping.
func (c *stdioClient) next(what string) map[string]json.RawMessage {
	c.t.Helper()
	select {
	case m, ok := <-c.msgs:
		if !ok {
			c.t.Fatalf("%s: idn mcp's stdout ended (stderr %s)", what, c.stderr.String())
		}
		return m
	case <-time.After(10 * time.Second):
		c.t.Fatalf("%s: none within 10 s", what)
	}
	return nil
}

// createTask makes a task-augmented call of work as request id, with the
// _meta meta, and returns the task's id and the progress notifications
// written before its answer and just after, up to the first count.
func (c *stdioClient) createTask(id, meta string, count int) (string, []string) {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"work","arguments":{"n":1},"task":{"ttl":1000},"_meta":` + meta + `}}`)
	var taskID string
	var progress []string
	for taskID == "" || len(progress) < count {
		m := c.next("the task and its first progress")
		switch {
		case string(m["method"]) == `"notifications/progress"`:
			progress = append(progress, string(m["params"]))
		case string(m["id"]) == id:
			var res struct {
				Task struct {
					TaskID string `json:"taskId"`
				} `json:"task"`
			}
			if json.Unmarshal(m["result"], &res) != nil || res.Task.TaskID == "" {
				c.t.Fatalf("a task-augmented call answered %s", m)
			}
			taskID = res.Task.TaskID
		default:
			c.t.Fatalf("unexpected message %s", m)
		}
	}
	return taskID, progress
}

// A task-augmented call's progress reaches the stdio client that made it,
// under its own token, as the gateway relays it: what the server sends
// before the task is created and after, until a status ends the task, and
// the last of it before that status (a client forgets a task's token at
// its end). No other session of the same agent gets it, even under the
// same token of its own, from a server that sends it to all its sessions.
func TestMCPBridgeRelaysTaskProgress(t *testing.T) {
	up := mcptaskstest.NewServer(t)
	st := newMCPStackFor(t, 0, &credvault.Connection{ID: "docs", Protocol: credvault.ProtocolMCP, BaseURL: up.URL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token"})
	owner, sibling := st.taskClient(t), st.taskClient(t)
	for range 2 {
		select {
		case <-up.Opened:
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream sessions' streams did not open")
		}
	}
	task, progress := owner.createTask("2", `{"progressToken":7}`, 1)
	if got := progress[0]; got != `{"progressToken":7,"progress":1,"message":"starting with sk-upstream-secret"}` {
		t.Errorf("the progress before the task: %s", got)
	}
	siblingTask, _ := sibling.createTask("2", `{"progressToken":7}`, 1)

	up.Progress(0, 2)
	up.Progress(0, 3)
	up.Status(siblingTask, "working")
	up.Status(task, "completed")
	for i := 2; i <= 3; i++ {
		want := `{"progressToken":7,"progress":` + strconv.Itoa(i) + `,"total":3}`
		if m := owner.next("the progress after the task"); string(m["params"]) != want {
			t.Fatalf("the progress after the task: %s, want params %s", m, want)
		}
	}
	if m := owner.next("the status that ends the task"); !strings.Contains(string(m["params"]), `"status":"completed"`) {
		t.Errorf("after the task's progress: %s", m)
	}
	t.Run("the same agent's other stdio session listens for the task's progress", func(t *testing.T) {
		// What it is sent next is the status of its own task.
		if m := sibling.next("the status of its own task"); string(m["method"]) != `"notifications/tasks/status"` || !strings.Contains(string(m["params"]), `"taskId":"`+siblingTask+`"`) {
			t.Errorf("got %s", m)
		}
	})
	t.Run("progress of a task that ended", func(t *testing.T) {
		later, _ := owner.createTask("3", `{}`, 0)
		up.Progress(0, 4)
		up.Status(later, "working")
		if m := owner.next("the status of a later task"); !strings.Contains(string(m["params"]), `"taskId":"`+later+`"`) {
			t.Errorf("got %s", m)
		}
	})
}

// Progress under a token that is not the stdio client's, or of a task
// that ended, never reaches it, from whatever gateway sends it: here the
// server plays the gateway, which would drop it itself.
func TestMCPBridgeDropsProgressNotTheClients(t *testing.T) {
	up := mcptaskstest.NewServer(t)
	st := &mcpStack{url: up.URL, home: t.TempDir()}
	agent, err := identity.New("desk-agent")
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Save(st.home); err != nil {
		t.Fatal(err)
	}
	c := st.taskClient(t)
	// The server answers the call with an event stream that carries its
	// first progress, which the gateway never does.
	task, progress := c.createTask("2", `{"progressToken":7}`, 1)
	if got := progress[0]; got != `{"progressToken":7,"progress":1,"message":"starting with sk-upstream-secret"}` {
		t.Errorf("the progress on the call's stream: %s", got)
	}
	up.Status(task, "completed")
	if m := c.next("the status that ends the task"); !strings.Contains(string(m["params"]), `"status":"completed"`) {
		t.Fatalf("got %s", m)
	}
	for _, tt := range []struct{ name, params string }{
		{"progress of the client's task after it ended", `{"progressToken":7,"progress":2}`},
		{"progress under a token the client never gave", `{"progressToken":"someone-else","progress":1}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up.Notify("notifications/progress", tt.params)
			// What the client is sent next is what the gateway sent after.
			up.Notify("notifications/tools/list_changed", `{}`)
			for {
				m := c.next("the notification after the progress")
				if string(m["method"]) == `"notifications/tools/list_changed"` {
					break
				}
				t.Errorf("got %s", m)
			}
		})
	}
}
