package controlplane

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"testing"

	"github.com/idnhq/idn/didresolve"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/testnode"
	"github.com/multiformats/go-multibase"
)

func TestDIDResolution(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		agent, other, pending := newAgent(t, "acme"), newAgent(t, "acme"), newAgent(t, "acme")
		s := e.seed(map[string]any{
			"namespaces": []string{"acme", "bob"},
			"services":   []map[string]string{{"slug": "github", "owner": "acme"}},
			"claims": []map[string]string{
				{"namespace": "acme", "service": "github", "public_key": pubKey(agent)},
				{"namespace": "acme", "service": "slack", "public_key": pubKey(agent)},
				{"namespace": "acme", "service": "github", "public_key": pubKey(other), "status": "revoked"},
				{"namespace": "acme", "service": "github", "public_key": pubKey(pending), "status": "pending"},
			},
		})

		r := e.signed("GET", "/.well-known/did/did:idn:acme", nil).want(t, 200, "")
		if ct := r.header.Get("Content-Type"); ct != "application/did+json" {
			t.Fatalf("Content-Type = %q", ct)
		}
		var doc didresolve.Document
		if err := json.Unmarshal(r.body, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.ID != "did:idn:acme" || len(doc.VerificationMethod) != 1 || len(doc.Service) != 2 ||
			doc.Context[0] != "https://www.w3.org/ns/did/v1" {
			t.Fatalf("document = %s", r.body)
		}
		vm := doc.VerificationMethod[0]
		// The multibase key decodes (independently of identity) to the agent key.
		enc, raw, err := multibase.Decode(vm.PublicKeyMultibase)
		if err != nil || enc != multibase.Base58BTC || !bytes.Equal(raw[:2], []byte{0xed, 0x01}) || !bytes.Equal(raw[2:], agent.PublicKey) {
			t.Fatalf("publicKeyMultibase %q does not decode to the agent key (%v)", vm.PublicKeyMultibase, err)
		}
		if vm.ID != agent.Certificate.KeyID || vm.ID != identity.KeyID("acme", agent.PublicKey) {
			t.Fatalf("verification method id %q, agent keyId %q", vm.ID, agent.Certificate.KeyID)
		}
		if vm.Type != "Ed25519VerificationKey2020" || vm.Controller != "did:idn:acme" ||
			doc.Authentication[0] != vm.ID || doc.AssertionMethod[0] != vm.ID {
			t.Fatalf("verification method = %+v", vm)
		}
		ep, err := url.Parse(doc.Service[0].ServiceEndpoint)
		if err != nil || ep.Path != "/v1/verify" || ep.Query().Get("namespace") != "acme" || doc.Service[0].Type != "AgentEndpoint" {
			t.Fatalf("service = %+v", doc.Service[0])
		}

		t.Run("content negotiation", func(t *testing.T) {
			for accept, want := range map[string]string{
				"":                        "application/did+json",
				"*/*":                     "application/did+json",
				"application/did+ld+json": "application/did+ld+json",
				"application/json":        "application/json",
				"application/json;q=0.5, application/did+ld+json;q=0.9": "application/did+ld+json",
				"text/html, application/*;q=0.1":                        "application/did+json",
			} {
				r := e.signed("GET", "/.well-known/did/did:idn:acme", nil, withHeader("Accept", accept)).want(t, 200, "")
				if got := r.header.Get("Content-Type"); got != want {
					t.Errorf("Accept %q: Content-Type %q, want %q", accept, got, want)
				}
			}
			e.signed("GET", "/.well-known/did/did:idn:acme", nil, withHeader("Accept", "text/html")).want(t, 406, "NOT_ACCEPTABLE")
		})
		t.Run("well-known errors", func(t *testing.T) {
			e.signed("GET", "/.well-known/did/did:web:acme", nil).want(t, 400, "INVALID_DID")
			e.signed("GET", "/.well-known/did/did:idn:a", nil).want(t, 400, "INVALID_DID")
			e.signed("GET", "/.well-known/did/did:idn:acme:github", nil).want(t, 400, "INVALID_DID")
			e.signed("GET", "/.well-known/did/did:idn:acme%23frag", nil).want(t, 400, "INVALID_DID")
			e.do("GET", "/.well-known/did/did:idn:acme", nil).want(t, 403, "AUTH_IDENTITY_INVALID")
			e.signed("GET", "/.well-known/did/did:idn:nobody", nil).want(t, 404, "DID_NOT_FOUND")
		})

		t.Run("resolution envelope", func(t *testing.T) {
			r := e.do("GET", "/1.0/identifiers/did:idn:acme", nil).want(t, 200, "")
			if ct := r.header.Get("Content-Type"); ct != `application/ld+json;profile="https://w3id.org/did-resolution"` {
				t.Fatalf("Content-Type = %q", ct)
			}
			res, err := didresolve.DecodeResult("acme", r.body)
			if err != nil {
				t.Fatal(err)
			}
			if res.Context != "https://w3id.org/did-resolution/v1" || res.DocumentMetadata.Deactivated ||
				res.DocumentMetadata.Created == "" || res.DocumentMetadata.Updated == "" || res.ResolutionMetadata.ContentType != "application/did+ld+json" {
				t.Fatalf("result = %s", r.body)
			}
			if k, err := res.Document.PublicKey(agent.Certificate.KeyID); err != nil || !bytes.Equal(k, agent.PublicKey) {
				t.Fatalf("PublicKey(keyId) = %x, %v", k, err)
			}
			for path, want := range map[string]struct {
				status int
				code   string
			}{
				"/1.0/identifiers/did:idn:nobody": {404, "notFound"},
				"/1.0/identifiers/not-a-did":      {400, "invalidDid"},
				"/1.0/identifiers/did:idn:-x-":    {400, "invalidDid"},
			} {
				r := e.do("GET", path, nil).want(t, want.status, "")
				var res didresolve.Result
				if err := json.Unmarshal(r.body, &res); err != nil || res.ResolutionMetadata.Error != want.code || res.Document != nil {
					t.Fatalf("%s: %s", path, r.body)
				}
			}
		})

		t.Run("owner API form", func(t *testing.T) {
			m := e.do("GET", "/v1/namespaces/acme/did", nil, withSession(s.Sessions["acme"])).want(t, 200, "").json(t)
			vms := m["verificationMethod"].([]any)
			if m["id"] != "did:idn:acme" || m["controller"] != "did:idn:acme" || len(vms) != 4 || m["created"] == "" {
				t.Fatalf("API form = %v", m)
			}
			statuses := map[string]int{}
			for _, v := range vms {
				v := v.(map[string]any)
				statuses[v["status"].(string)]++
				raw, _ := base64.StdEncoding.DecodeString(v["publicKeyBase64"].(string))
				if len(raw) != 32 || v["id"] != identity.KeyID("acme", raw) ||
					v["service"] != "did:idn:acme#service-"+v["service_slug"].(string) {
					t.Fatalf("method = %v", v)
				}
			}
			if statuses["approved"] != 2 || statuses["revoked"] != 1 || statuses["pending"] != 1 {
				t.Fatalf("statuses = %v", statuses)
			}
			e.do("GET", "/v1/namespaces/acme/did", nil).want(t, 401, "ADMIN_UNAUTHORIZED")
			e.do("GET", "/v1/namespaces/acme/did", nil, withSession(s.Sessions["bob"])).want(t, 403, "NAMESPACE_FORBIDDEN")
		})

		// Every form of the document the server produces expands in
		// JSON-LD safe mode with no relative IRI left.
		t.Run("strict JSON-LD", func(t *testing.T) {
			forms := map[string][]byte{
				"owner API form": e.do("GET", "/v1/namespaces/acme/did", nil, withSession(s.Sessions["acme"])).want(t, 200, "").body,
			}
			for _, accept := range []string{"application/did+json", "application/did+ld+json", "application/json"} {
				forms["well-known as "+accept] = e.signed("GET", "/.well-known/did/did:idn:acme", nil, withHeader("Accept", accept)).want(t, 200, "").body
			}
			var res struct{ DIDDocument json.RawMessage }
			if err := json.Unmarshal(e.do("GET", "/1.0/identifiers/did:idn:acme", nil).want(t, 200, "").body, &res); err != nil {
				t.Fatal(err)
			}
			forms["resolution result's document"] = res.DIDDocument
			for name, body := range forms {
				if _, err := testnode.ExpandSafe(t, body); err != nil {
					t.Errorf("%s: safe-mode expansion refused it: %v\n%s", name, err, body)
				}
			}
		})

		t.Run("deactivated 410", func(t *testing.T) {
			e.deactivate("acme")
			r := e.do("GET", "/1.0/identifiers/did:idn:acme", nil).want(t, 410, "")
			res, err := didresolve.DecodeResult("acme", r.body)
			if err != nil || !res.DocumentMetadata.Deactivated || len(res.Document.VerificationMethod) != 0 {
				t.Fatalf("deactivated result = %s (%v)", r.body, err)
			}
			r = e.signed("GET", "/.well-known/did/did:idn:acme", nil).want(t, 410, "")
			var doc didresolve.Document
			if json.Unmarshal(r.body, &doc) != nil || len(doc.VerificationMethod) != 0 || len(doc.Service) != 0 {
				t.Fatalf("deactivated document = %s", r.body)
			}
			if _, err := testnode.ExpandSafe(t, r.body); err != nil {
				t.Errorf("deactivated document: safe-mode expansion refused it: %v", err)
			}
		})

		t.Run("database down", func(t *testing.T) {
			e.st.Close()
			r := e.do("GET", "/1.0/identifiers/did:idn:bob", nil).want(t, 500, "")
			var res didresolve.Result
			if json.Unmarshal(r.body, &res) != nil || res.ResolutionMetadata.Error != "internalError" {
				t.Fatalf("body = %s", r.body)
			}
		})
	})
}
