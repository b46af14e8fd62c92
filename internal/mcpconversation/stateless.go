package mcpconversation

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/idnhq/idn/kit/testnode"
)

// Stateless holds the conversation of stateless.mjs with the server at
// url (the TypeScript SDK v2 client speaking MCP 2026-07-28), sending
// headers ("Name=value") with every request, and returns its steps.
func Stateless(t *testing.T, url string, headers ...string) []map[string]any {
	t.Helper()
	return StatelessWith(t, nil, append([]string{url}, headers...)...)
}

// StatelessWith holds the conversation of stateless.mjs run with args
// ("URL [HEADER=VALUE...]" or "stdio COMMAND [ARG...]") and env added to
// the process's, and returns its steps.
func StatelessWith(t *testing.T, env []string, args ...string) []map[string]any {
	t.Helper()
	modules, node := testnode.Modules(t, "the TypeScript SDK v2 client")
	_, here, _, _ := runtime.Caller(0)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(filepath.Dir(here), "stateless.mjs")}, args...)...)
	cmd.Env = append(append(os.Environ(), "IDN_NODE_MODULES="+modules), env...)
	// A server the script started (over stdio) may hold its output open.
	cmd.WaitDelay = 5 * time.Second
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

// CompareStateless fails t when two transcripts of stateless.mjs's
// conversation, held directly (want) and through the gateway (got),
// differ in anything but what docs/gateway.md lists: the server's name
// in results, and an error's message (the gateway words its own
// refusals; the code is the same).
func CompareStateless(t *testing.T, want, got []map[string]any) {
	t.Helper()
	if diff := gocmp.Diff(documented(want), documented(got)); diff != "" {
		t.Errorf("direct (-) and through the gateway (+) differ:\n%s", diff)
	}
}

// documented is a copy of steps without the differences CompareStateless
// allows.
func documented(steps []map[string]any) []map[string]any {
	raw, _ := json.Marshal(steps)
	var out []map[string]any
	_ = json.Unmarshal(raw, &out)
	for _, st := range out {
		if res, ok := st["result"].(map[string]any); ok {
			if meta, ok := res["_meta"].(map[string]any); ok {
				if info, ok := meta["io.modelcontextprotocol/serverInfo"].(map[string]any); ok {
					info["name"] = "(the server)"
				}
			}
		}
		if e, ok := st["error"].(map[string]any); ok {
			delete(e, "message")
		}
	}
	return out
}
