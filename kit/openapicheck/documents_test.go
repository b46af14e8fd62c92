package openapicheck

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/idnhq/idn/kit/testnode"
)

// documents are the servers' OpenAPI documents, from this folder.
var documents = map[string]string{
	"controlplane": "../../controlplane/openapi.json",
	"gateway":      "../../gateway/openapi.json",
}

// lint runs @seriousme/openapi-schema-validator (pinned in
// kit/testnode), which holds a document to the OpenAPI Initiative's
// own JSON Schema and refuses one whose objects repeat a key.
func lint(t *testing.T, path string) (valid bool, out []byte) {
	t.Helper()
	modules, node := testnode.Modules(t, "the OpenAPI lint")
	cli := filepath.Join(modules, "@seriousme", "openapi-schema-validator", "bin", "validate-api-cli.js")
	out, err := exec.Command(node, cli, path).CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run the OpenAPI lint: %v", err)
	}
	return err == nil && bytes.Contains(out, []byte(`"valid": true`)), out
}

// TestDocuments holds both servers' documents to Parse's checks (a key
// repeated in an object among them) and to an independent linter, so a
// document other tools refuse cannot ship.
func TestDocuments(t *testing.T) {
	for name, path := range documents {
		t.Run(name, func(t *testing.T) {
			doc, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Parse(doc); err != nil {
				t.Error(err)
			}
			if valid, out := lint(t, path); !valid {
				t.Errorf("the OpenAPI lint refuses %s:\n%s", path, out)
			}
		})
	}
}

// TestLintRefusesARepeatedKey: the linter is not lenient where
// encoding/json is, so it would have caught an operation with two
// descriptions.
func TestLintRefusesARepeatedKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "openapi.json")
	doc := `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{"/a":{"get":{"description":"one",
		"responses":{"200":{"description":"ok"}},"description":"two"}}}}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if valid, out := lint(t, path); valid {
		t.Errorf("the OpenAPI lint takes an operation with two descriptions:\n%s", out)
	}
	if err := os.WriteFile(path, bytes.Replace([]byte(doc), []byte(`"description":"one",`), nil, 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if valid, out := lint(t, path); !valid {
		t.Errorf("the OpenAPI lint refuses a valid document:\n%s", out)
	}
}
