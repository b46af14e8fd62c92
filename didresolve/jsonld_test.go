package didresolve_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idnhq/idn/didresolve"
)

// pinnedContexts are the remote contexts idn documents name, as published
// copies kept in testdata/contexts (so expansion never touches the network).
var pinnedContexts = map[string]string{
	didresolve.ContextDID:     "testdata/contexts/did-v1.jsonld",
	didresolve.ContextEd25519: "testdata/contexts/ed25519-2020-v1.jsonld",
}

// expandSafe expands doc with jsonld.js in safe mode, the mode Digital
// Bazaar's libraries use, which fails on any term no context defines. It
// returns the expanded form, or the processor's message as an error.
func expandSafe(t *testing.T, doc any) ([]byte, error) {
	t.Helper()
	modules := os.Getenv("IDN_NODE_MODULES")
	node, err := exec.LookPath("node")
	if modules == "" || err != nil {
		msg := "JSON-LD expansion needs node and the packages of internal/testnode (set IDN_NODE_MODULES; .ci/run does)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	abs, err := filepath.Abs(modules)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"testdata/expand.mjs"}
	for url, file := range pinnedContexts {
		args = append(args, url+"="+file)
	}
	in, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, args...)
	cmd.Env = append(os.Environ(), "IDN_NODE_MODULES="+abs)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return out, nil
}

func TestDocumentsExpandInSafeMode(t *testing.T) {
	t.Parallel()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)).Public().(ed25519.PublicKey)
	doc := didresolve.NewDocument("alice", []ed25519.PublicKey{key},
		[]didresolve.Endpoint{{Service: "github", URL: "https://cp.example/v1/verify?namespace=alice&service=github"}})
	vm := doc.VerificationMethod[0]
	tests := []struct {
		name string
		doc  any
		want []string // absolute IRIs the expansion must contain
	}{
		{"document with a key and a service", doc, []string{
			"https://w3id.org/security#Ed25519VerificationKey2020",
			didresolve.TermsIRI + "AgentEndpoint",
			"https://w3id.org/security#publicKeyMultibase",
		}},
		{"deactivated document", didresolve.NewDocument("alice", nil, nil), nil},
		// The owner API's form of the document (GET /v1/namespaces/{ns}/did).
		{"owner API form", map[string]any{
			"@context": didresolve.Context(), "id": doc.ID, "controller": doc.ID,
			"created": "2026-11-24T00:00:00Z", "updated": "2026-11-24T00:00:00Z", "deactivated": false,
			"verificationMethod": []map[string]any{{
				"id": vm.ID, "type": didresolve.KeyType, "publicKeyBase64": "AAAA",
				"service": "github", "status": "approved", "claim_id": "clm_1",
			}},
		}, []string{didresolve.TermsIRI + "claimStatus", didresolve.TermsIRI + "publicKeyBase64", "http://purl.org/dc/terms/created"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw, err := expandSafe(t, tt.doc)
			if err != nil {
				t.Fatalf("safe-mode expansion refused the document: %v", err)
			}
			for _, iri := range tt.want {
				if !strings.Contains(string(raw), iri) {
					t.Errorf("expanded form lacks %s:\n%s", iri, raw)
				}
			}
		})
	}
}

func TestUndefinedTermIsRefused(t *testing.T) {
	t.Parallel()
	// The check itself must be able to fail: the service type of earlier
	// documents, with no context defining it.
	doc := map[string]any{
		"@context": []string{didresolve.ContextDID, didresolve.ContextEd25519},
		"id":       "did:idn:alice",
		"service":  []map[string]any{{"id": "did:idn:alice#service-x", "type": "AgentEndpoint", "serviceEndpoint": "https://cp.example/v1/verify"}},
	}
	_, err := expandSafe(t, doc)
	if err == nil || !strings.Contains(err.Error(), "relative @type reference") {
		t.Fatalf("safe mode accepted an undefined type (err %v)", err)
	}
}
