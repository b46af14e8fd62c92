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

	"github.com/idnhq/idn/kit/testnode"
)

// Stateless holds the conversation of stateless.mjs with the server at
// url (the TypeScript SDK v2 client speaking MCP 2026-07-28), sending
// headers ("Name=value") with every request, and returns its steps.
func Stateless(t *testing.T, url string, headers ...string) []map[string]any {
	t.Helper()
	modules, node := testnode.Modules(t, "the TypeScript SDK v2 client")
	_, here, _, _ := runtime.Caller(0)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(filepath.Dir(here), "stateless.mjs"), url}, headers...)...)
	cmd.Env = append(os.Environ(), "IDN_NODE_MODULES="+modules)
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
