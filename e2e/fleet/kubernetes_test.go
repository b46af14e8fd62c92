package fleet_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/idnhq/idn/kit/testnode"
)

// The Kubernetes manifests of deploy/fleet pass the Kubernetes API's
// schemas (kubernetes-models, pinned in kit/testnode): every
// document a kind the API has, every field of the right type, every
// required field present.
func TestKubernetesManifests(t *testing.T) {
	modules, node := testnode.Modules(t, "the Kubernetes schema check")
	files, err := filepath.Glob(filepath.Join(repo, "deploy", "fleet", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	_, self, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(self), repo, "kit", "testnode", "k8s", "validate.mjs")
	cmd := exec.Command(node, append([]string{script}, files...)...)
	cmd.Env = append(cmd.Environ(), "IDN_NODE_MODULES="+modules)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("the manifests do not pass the schemas: %v", err)
	}
}
