// Package mcpconversation holds one conversation with the reference MCP
// "everything" server (the npm package pinned in kit/testnode) using
// the official TypeScript SDK client, and compares two transcripts of it
// (held directly and through the gateway) message by message, allowing
// only the differences docs/gateway.md lists. It is for tests.
package mcpconversation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/kit/testnode"
)

// StartEverything runs the reference "everything" MCP server (the pinned
// npm package) over Streamable HTTP and returns its MCP endpoint.
func StartEverything(t *testing.T) string {
	t.Helper()
	modules, node := testnode.Modules(t, "the tests against the reference MCP server")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	cmd := exec.Command(node, filepath.Join(modules, "@modelcontextprotocol/server-everything/dist/index.js"), "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "listening on port") {
				said = true
				listening <- true
			}
		}
		if !said {
			listening <- false
		}
	}()
	select {
	case ok := <-listening:
		if !ok {
			t.Fatal("the everything server ended before it listened")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the everything server did not start listening")
	}
	return "http://127.0.0.1:" + port + "/mcp"
}

// TypeScript holds conversation.mjs's conversation and returns its
// transcript. args are the script's: "http URL [HEADER=VALUE...]" or
// "stdio GATEWAY CONNECTION" (idn mcp, run as $IDN_BINARY from env); caps
// is "all" or "roots" (see the script); env is added to the process's.
func TypeScript(t *testing.T, caps string, env []string, args ...string) []map[string]any {
	t.Helper()
	modules, node := testnode.Modules(t, "the tests against the reference MCP server")
	_, here, _, _ := runtime.Caller(0)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(filepath.Dir(here), "conversation.mjs")}, args...)...)
	cmd.Env = append(append(os.Environ(), "IDN_NODE_MODULES="+modules, "CONVERSATION_CAPS="+caps), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var steps []map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &steps); err != nil {
		t.Fatalf("node printed %q: %v", stdout.String(), err)
	}
	return steps
}

// Check fails t when the direct conversation did not exercise what it is
// meant to: every step answered but those meant to fail, the server's
// requests asked and its notifications told, a task run to its end and
// another cancelled, and the client's own tasks run for the server.
func Check(t *testing.T, steps []map[string]any, wantAsked string) {
	t.Helper()
	var asked, told []string
	fails := map[string]bool{
		"a task-only tool called without a task": true,
		"tasks/cancel of a finished task":        true,
		"tasks/get of an unknown task":           true,
	}
	for _, s := range steps {
		if e, ok := s["error"]; ok != fails[s["step"].(string)] && s["step"] != "unknown tool" {
			t.Errorf("step %v: error %v", s["step"], e)
		}
		r, _ := s["result"].(map[string]any)
		switch s["step"] {
		case "tools/call trigger-sampling-request-async", "tools/call trigger-elicitation-request-async":
			// The client ran what the server asked as a task of its own.
			if text := fmt.Sprint(r["content"]); !strings.Contains(text, "Task created: ") || !strings.Contains(text, "Poll 1: completed") {
				t.Errorf("%s = %v", s["step"], r)
			}
		case "tasks/result":
			if len(List(r, "content")) == 0 {
				t.Errorf("tasks/result = %v", r)
			}
		case "tasks/cancel":
			if r["status"] != "cancelled" {
				t.Errorf("tasks/cancel = %v", r)
			}
		}
		if r, ok := s["result"].(map[string]any); ok {
			if m, ok := r["told"].(string); ok {
				told = append(told, m)
			}
		}
		for _, a := range List(s, "asked") {
			asked = append(asked, a["asked"].(string))
		}
		if s["step"] == "tools/call with progress" {
			if r, _ := s["result"].(map[string]any); len(List(r, "progress")) != 3 {
				t.Errorf("progress = %v", r)
			}
		}
	}
	if got := strings.Join(asked, ","); got != wantAsked {
		t.Errorf("the server asked %s", got)
	}
	wantTold := "notifications/message,notifications/resources/updated,notifications/message"
	if slices.ContainsFunc(steps, func(s map[string]any) bool { return s["step"] == "a task status notification" }) {
		wantTold += ",notifications/tasks/status"
	}
	if got := strings.Join(told, ","); got != wantTold {
		t.Errorf("the server told %s", got)
	}
}

// Compare fails t when two transcripts of the same
// conversation, held directly (want) and through the gateway (got), differ
// in anything but what docs/gateway.md lists as the gateway's differences.
func Compare(t *testing.T, want, got []map[string]any) {
	t.Helper()
	want, got = normalize(t, want), normalize(t, got)
	for i := range min(len(want), len(got)) {
		allowDifferences(t, want[i], got[i])
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("direct (-) and through the gateway (+) differ:\n%s", diff)
	}
}

// createdAt matches the creation time the everything server writes into
// each dynamic resource it makes.
var createdAt = regexp.MustCompile(`created at [0-9:]+ [AP]M`)

// sessionID matches the upstream session ids the everything server writes
// into its logs: each conversation has its own.
var sessionID = regexp.MustCompile(`session [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// taskID and timestamp match a task's id and times, which differ from run
// to run.
var (
	taskID = regexp.MustCompile(`"taskId":"[0-9a-f]{32}"`)
	// clientTaskID matches the id of a task the client created, where
	// the server writes it in a tool's text (JSON within JSON).
	clientTaskID = regexp.MustCompile(`(Task created: |\\"taskId\\": \\")[0-9a-f]{32}`)
	timestamp    = regexp.MustCompile(`"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z"`)
)

// normalize removes what differs between two runs of one conversation
// against the same server: the dynamic resources' creation times, the
// session ids in the server's logs, and tasks' ids and times (the
// server's and the client's).
func normalize(t *testing.T, steps []map[string]any) []map[string]any {
	t.Helper()
	raw, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	raw = createdAt.ReplaceAll(raw, []byte("created at (time)"))
	raw = sessionID.ReplaceAll(raw, []byte("session (id)"))
	raw = taskID.ReplaceAll(raw, []byte(`"taskId":"(id)"`))
	raw = clientTaskID.ReplaceAll(raw, []byte(`${1}(id)`))
	raw = timestamp.ReplaceAll(raw, []byte(`"(time)"`))
	var out []map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// allowDifferences checks, and then removes, the differences the gateway
// is documented to make in one step (docs/gateway.md, "What the MCP
// endpoint relays").
func allowDifferences(t *testing.T, want, got map[string]any) {
	t.Helper()
	step, _ := want["step"].(string)
	wantRes, _ := want["result"].(map[string]any)
	gotRes, _ := got["result"].(map[string]any)
	switch step {
	case "prompts/list":
		// A false "required" is written as its absence.
		for _, p := range List(wantRes, "prompts") {
			args, _ := p["arguments"].([]any)
			for _, a := range args {
				if a, ok := a.(map[string]any); ok && a["required"] == false {
					delete(a, "required")
				}
			}
		}
	case "completion/complete":
		if c, ok := wantRes["completion"].(map[string]any); ok && c["hasMore"] == false {
			delete(c, "hasMore")
		}
	case "invalid arguments":
		// The gateway checks arguments against the tool's input schema
		// itself, and answers with its own message and code.
		meta, _ := gotRes["_meta"].(map[string]any)
		idn, _ := meta["idn/error"].(map[string]any)
		if wantRes["isError"] != true || gotRes["isError"] != true || idn["code"] != errcode.MCPToolArgumentsInvalid.String() {
			t.Errorf("invalid arguments: direct %v, through the gateway %v", want, got)
		}
		delete(want, "result")
		delete(got, "result")
	case "tasks/get of an unknown task":
		// The gateway answers a task id the session does not own itself,
		// with the code servers use and a wording of its own.
		wantErr, _ := want["error"].(map[string]any)
		gotErr, _ := got["error"].(map[string]any)
		if wantErr["code"] != float64(-32602) || gotErr["code"] != float64(-32602) {
			t.Errorf("unknown task: direct %v, through the gateway %v", want, got)
		}
		delete(want, "error")
		delete(got, "error")
	case "unknown tool":
		// A tool the server does not list is refused by the gateway.
		gotErr, _ := got["error"].(map[string]any)
		if wantRes["isError"] != true || gotErr["code"] != float64(-32602) {
			t.Errorf("unknown tool: direct %v, through the gateway %v", want, got)
		}
		delete(want, "result")
		delete(got, "error")
	}
	// The SDK's server writes the cache hints of list and read results
	// even when the server sent none, with the protocol's defaults.
	// (A Go client reads their absence as zero values.)
	if gotRes != nil && gotRes["ttlMs"] == float64(0) && gotRes["cacheScope"] == "public" {
		if scope, ok := wantRes["cacheScope"]; !ok || scope == "" {
			delete(gotRes, "ttlMs")
			delete(gotRes, "cacheScope")
			delete(wantRes, "ttlMs")
			delete(wantRes, "cacheScope")
		}
	}
	// The SDK's server writes an elicitation's default mode.
	asked, _ := got["asked"].([]any)
	for _, a := range asked {
		a, _ := a.(map[string]any)
		if p, ok := a["params"].(map[string]any); ok && a["asked"] == "elicitation/create" && p["mode"] == "form" {
			delete(p, "mode")
			for _, w := range List(want, "asked") {
				if w, ok := w["params"].(map[string]any); ok && w["mode"] == "" {
					delete(w, "mode") // a Go client's zero value
				}
			}
		}
	}
}

// List returns the objects of the array res[key].
func List(res map[string]any, key string) []map[string]any {
	items, _ := res[key].([]any)
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}
