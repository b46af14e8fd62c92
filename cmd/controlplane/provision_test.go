package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProvision: provision creates the service and writes its API key to
// the file once; run again (as compose does at every start) it keeps the
// file and mints nothing; without a file it prints a new key of the same
// service.
func TestProvision(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "shared", "service-api-key")
	vars := map[string]string{"IDN_DATA_DIR": filepath.Join(dir, "data")}
	provision := func(args ...string) (int, string, string) {
		var stdout, stderr strings.Builder
		code := run(context.Background(), append([]string{"provision"}, args...), env(vars), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	if code, _, stderr := provision("--namespace", "operator", "--service", "local-gateway", "--api-key-file", keyFile); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil || !strings.HasPrefix(string(key), "idn_sk_") {
		t.Fatalf("key file: %v %q", err, key)
	}
	if fi, _ := os.Stat(keyFile); fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	code, stdout, stderr := provision("--namespace", "operator", "--service", "local-gateway", "--api-key-file", keyFile)
	if again, _ := os.ReadFile(keyFile); code != 0 || string(again) != string(key) || stdout != "" || !strings.Contains(stderr, "provisioned already") {
		t.Fatalf("second run: exit %d, file changed %v, %q %q", code, string(again) != string(key), stdout, stderr)
	}
	code, stdout, stderr = provision("--namespace", "operator", "--service", "local-gateway")
	if other := strings.TrimSpace(stdout); code != 0 || !strings.HasPrefix(other, "idn_sk_") || other == strings.TrimSpace(string(key)) {
		t.Fatalf("without a file: exit %d, %q %q", code, stdout, stderr)
	}
	if code, _, stderr := provision("--service", "local-gateway"); code != 2 || !strings.Contains(stderr, "--namespace") {
		t.Errorf("without a namespace: exit %d %q", code, stderr)
	}
	if code, _, stderr := provision("--namespace", "operator", "--service", "Not A Slug"); code != 1 || !strings.Contains(stderr, "slug") {
		t.Errorf("bad slug: exit %d %q", code, stderr)
	}
}
