// Package testnode runs the node packages some tests drive (jsonld.js, the
// official MCP conformance runner, MCP SDK clients and servers). The packages
// are pinned by this folder's package-lock.json and installed with npm ci
// (.ci/run does); tests find them through IDN_NODE_MODULES. Without node
// or the packages a test skips, or fails under CI=true. Nothing in a
// build imports this package.
package testnode

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Modules returns the absolute node_modules folder and the node binary,
// skipping t (failing it under CI=true) when either is missing; what
// names what the test needs them for.
func Modules(t testing.TB, what string) (modules, node string) {
	t.Helper()
	modules = os.Getenv("IDN_NODE_MODULES")
	node, err := exec.LookPath("node")
	if modules == "" || err != nil {
		missing(t, what)
	}
	abs, err := filepath.Abs(modules)
	if err != nil {
		t.Fatal(err)
	}
	return abs, node
}

// missing skips t, or fails it under CI=true, for want of the packages.
func missing(t testing.TB, what string) {
	t.Helper()
	msg := what + " needs node and the packages of kit/testnode (set IDN_NODE_MODULES; .ci/run does)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// pinnedContexts are the remote contexts idn documents name, as published
// copies kept in jsonld/contexts, so expansion never touches the network.
var pinnedContexts = map[string]string{
	"https://www.w3.org/ns/did/v1":                     "did-v1.jsonld",
	"https://w3id.org/security/suites/ed25519-2020/v1": "ed25519-2020-v1.jsonld",
}

// ExpandSafe expands the JSON-LD document doc with jsonld.js in safe
// mode, the mode Digital Bazaar's libraries use, which fails on any term
// no context defines; it also fails when the expanded form holds a
// relative IRI (a bare "github" where the context says an IRI belongs).
// It returns the expanded form, or the processor's message as an error.
func ExpandSafe(t testing.TB, doc []byte) ([]byte, error) {
	t.Helper()
	modules, node := Modules(t, "JSON-LD expansion")
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "jsonld")
	args := []string{filepath.Join(dir, "expand.mjs")}
	for url, name := range pinnedContexts {
		args = append(args, url+"="+filepath.Join(dir, "contexts", name))
	}
	cmd := exec.Command(node, args...)
	cmd.Env = append(os.Environ(), "IDN_NODE_MODULES="+modules)
	cmd.Stdin = bytes.NewReader(doc)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return out, nil
}
