package didresolve_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"

	"github.com/idnhq/idn/didresolve"
	"github.com/idnhq/idn/kit/testnode"
)

// expandSafe expands doc in JSON-LD safe mode (see testnode.ExpandSafe).
func expandSafe(t *testing.T, doc any) ([]byte, error) {
	t.Helper()
	in, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return testnode.ExpandSafe(t, in)
}

func TestDocumentsExpandInSafeMode(t *testing.T) {
	t.Parallel()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)).Public().(ed25519.PublicKey)
	doc := didresolve.NewDocument("alice", []ed25519.PublicKey{key},
		[]didresolve.Endpoint{{Service: "github", URL: "https://cp.example/v1/verify?namespace=alice&service=github"}})
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

func TestRelativeIRIIsRefused(t *testing.T) {
	t.Parallel()
	// Safe mode itself lets a value coerced to @id through as a relative
	// IRI: the owner form's earlier bare service slug.
	doc := map[string]any{
		"@context": didresolve.Context(),
		"id":       "did:idn:alice",
		"verificationMethod": []map[string]any{{"id": "did:idn:alice#k", "type": didresolve.KeyType,
			"service": "github"}},
	}
	_, err := expandSafe(t, doc)
	if err == nil || !strings.Contains(err.Error(), "relative IRI") {
		t.Fatalf("a bare slug as an IRI passed (err %v)", err)
	}
}
