package didresolve_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/didresolve"
	"github.com/idnhq/idn/identity"
)

func newAgent(tb testing.TB) *identity.Identity {
	id, err := identity.New("acme")
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

func TestResolverCacheBound(t *testing.T) {
	var hits atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		ns := strings.TrimPrefix(r.URL.Path, "/1.0/identifiers/did:idn:")
		json.NewEncoder(w).Encode(didresolve.Result{Context: didresolve.ContextResolution, Document: didresolve.NewDocument(ns, nil, nil)})
	}))
	defer ts.Close()
	r := &didresolve.Resolver{BaseURL: ts.URL, MaxEntries: 2}
	for _, ns := range []string{"aaa", "bbb", "aaa", "ccc", "aaa", "bbb"} {
		if _, err := r.Resolve(t.Context(), "did:idn:"+ns); err != nil {
			t.Fatal(err)
		}
	}
	// aaa bbb (miss, miss), aaa (hit), ccc evicts bbb, aaa (hit), bbb (miss).
	if hits.Load() != 4 {
		t.Fatalf("hits = %d, want 4", hits.Load())
	}
}

// TestResolverRefusesBadDocuments: a control plane (or anything in the
// path) that serves a document inconsistent with the DID is not trusted.
func TestResolverRefusesBadDocuments(t *testing.T) {
	agent, intruder := newAgent(t), newAgent(t)
	good := didresolve.NewDocument("acme", []ed25519.PublicKey{agent.PublicKey}, nil)
	for name, mutate := range map[string]func(*didresolve.Result){
		"document of another DID": func(r *didresolve.Result) { r.Document.ID = "did:idn:evil" },
		"key swapped under same id": func(r *didresolve.Result) {
			r.Document.VerificationMethod[0].PublicKeyMultibase = identity.Multibase(intruder.PublicKey)
		},
		"not an ed25519 multibase":  func(r *didresolve.Result) { r.Document.VerificationMethod[0].PublicKeyMultibase = "zQ3sh" },
		"foreign controller":        func(r *didresolve.Result) { r.Document.VerificationMethod[0].Controller = "did:idn:evil" },
		"no document":               func(r *didresolve.Result) { r.Document = nil },
		"deactivated but with keys": func(r *didresolve.Result) { r.DocumentMetadata.Deactivated = true },
		"resolution error in 200":   func(r *didresolve.Result) { r.ResolutionMetadata.Error = "internalError" },
	} {
		t.Run(name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				doc := *good
				doc.VerificationMethod = append([]didresolve.VerificationMethod(nil), good.VerificationMethod...)
				res := didresolve.Result{Context: didresolve.ContextResolution, Document: &doc}
				mutate(&res)
				json.NewEncoder(w).Encode(res)
			}))
			defer ts.Close()
			r := &didresolve.Resolver{BaseURL: ts.URL}
			if _, err := r.Resolve(t.Context(), "did:idn:acme"); err == nil {
				t.Fatal("resolved a bad document")
			}
		})
	}
	t.Run("oversized answer", func(t *testing.T) {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Write(bytes.Repeat([]byte(" "), 2<<20))
		}))
		defer ts.Close()
		if _, err := (&didresolve.Resolver{BaseURL: ts.URL}).Resolve(t.Context(), "did:idn:acme"); err == nil {
			t.Fatal("accepted a 2 MiB answer")
		}
	})
}

func FuzzParseDID(f *testing.F) {
	for _, s := range []string{"did:idn:acme", "did:idn:acme:svc", "did:idn:acme#k", "did:idn:", "did:idn:a-", "did:web:x", "did:idn:ACME-9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ns, err := didresolve.ParseDID(s)
		if err != nil {
			if !errors.Is(err, didresolve.ErrInvalidDID) {
				t.Fatalf("error %v does not wrap ErrInvalidDID", err)
			}
			return
		}
		if identity.DID(ns) != s || identity.ValidNamespace(ns) != nil {
			t.Fatalf("ParseDID(%q) = %q", s, ns)
		}
	})
}

func FuzzDecodeResult(f *testing.F) {
	agent, _ := identity.New("acme")
	good, _ := json.Marshal(didresolve.Result{Context: didresolve.ContextResolution,
		Document: didresolve.NewDocument("acme", []ed25519.PublicKey{agent.PublicKey}, []didresolve.Endpoint{{Service: "gh", URL: "https://x/v"}})})
	f.Add(good)
	f.Add([]byte(`{"didDocument":null,"didResolutionMetadata":{"error":"notFound"}}`))
	f.Add([]byte(`{"didDocument":{"id":"did:idn:acme","verificationMethod":[{"id":"x","type":"Ed25519VerificationKey2020","controller":"did:idn:acme","publicKeyMultibase":"z"}]}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := didresolve.DecodeResult("acme", body)
		if err != nil {
			return
		}
		for _, vm := range res.Document.VerificationMethod {
			k, err := res.Document.PublicKey(vm.ID)
			if err != nil || identity.KeyID("acme", k) != vm.ID {
				t.Fatalf("accepted method %+v: %v", vm, err)
			}
		}
	})
}

func ExampleNewDocument() {
	seed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	doc := didresolve.NewDocument("acme", []ed25519.PublicKey{pub},
		[]didresolve.Endpoint{{Service: "github", URL: "https://registry.example/v1/verify?namespace=acme&service=github"}})
	vm := doc.VerificationMethod[0]
	fmt.Println(doc.ID)
	fmt.Println(vm.ID == identity.KeyID("acme", pub), vm.Type, strings.HasPrefix(vm.PublicKeyMultibase, "z6Mk"))
	fmt.Println(doc.Service[0].ID)
	// Output:
	// did:idn:acme
	// true Ed25519VerificationKey2020 true
	// did:idn:acme#service-github
}

func ExampleResolver() {
	// A stand-in for a control plane's DID resolution endpoint, answering
	// for namespace "acme" and its one approved agent.
	agent, _ := identity.New("acme")
	cp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/1.0/identifiers/did:idn:acme" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(didresolve.Result{Context: didresolve.ContextResolution,
			Document: didresolve.NewDocument("acme", []ed25519.PublicKey{agent.PublicKey}, nil)})
	}))
	defer cp.Close()

	// Any service can resolve did:idn DIDs and check agent keys.
	r := &didresolve.Resolver{BaseURL: cp.URL, TTL: time.Minute}
	res, err := r.Resolve(context.Background(), "did:idn:acme")
	if err != nil {
		fmt.Println(err)
		return
	}
	key, err := res.Document.PublicKey(agent.Certificate.KeyID)
	fmt.Println(err == nil && key.Equal(agent.PublicKey), res.DocumentMetadata.Deactivated)
	// Output: true false
}
