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
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/didresolve"
	"github.com/idnhq/idn/identity"
)

const seedToken = "didresolve-test-seed"

// controlPlane starts a real control plane on SQLite and seeds it with
// the given approved agents of namespace "acme"; hits counts DID requests.
func controlPlane(tb testing.TB, agents ...*identity.Identity) (url string, hits *atomic.Int64) {
	tb.Helper()
	st, err := controlplane.Open(context.Background(), controlplane.StoreConfig{SQLitePath: filepath.Join(tb.TempDir(), "cp.db")})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	srv, err := controlplane.New(controlplane.Config{Store: st, JWTSecret: bytes.Repeat([]byte("s"), 32), TestSeedToken: seedToken})
	if err != nil {
		tb.Fatal(err)
	}
	hits = new(atomic.Int64)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/1.0/") {
			hits.Add(1)
		}
		srv.ServeHTTP(w, r)
	}))
	tb.Cleanup(ts.Close)
	if err := seed(ts.URL, agents...); err != nil {
		tb.Fatal(err)
	}
	return ts.URL, hits
}

// seed creates namespace acme with approved claims for the agents.
func seed(base string, agents ...*identity.Identity) error {
	var claims []map[string]string
	for _, a := range agents {
		claims = append(claims, map[string]string{"namespace": a.Namespace, "service": "github", "public_key": identity.FormatPublicKey(a.PublicKey)})
	}
	body, _ := json.Marshal(map[string]any{"namespaces": []string{"acme"}, "claims": claims})
	req, _ := http.NewRequest("POST", base+"/v1/test/seed", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", seedToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("seed: HTTP %d", res.StatusCode)
	}
	return nil
}

func newAgent(tb testing.TB) *identity.Identity {
	id, err := identity.New("acme")
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

func TestResolverAgainstControlPlane(t *testing.T) {
	agent := newAgent(t)
	base, hits := controlPlane(t, agent)
	now := time.Unix(1_800_000_000, 0)
	r := &didresolve.Resolver{BaseURL: base, TTL: time.Minute, Clock: func() time.Time { return now }}

	res, err := r.Resolve(t.Context(), agent.Certificate.KeyID) // a DID URL resolves its DID
	if err != nil {
		t.Fatal(err)
	}
	k, err := res.Document.PublicKey(agent.Certificate.KeyID)
	if err != nil || !k.Equal(agent.PublicKey) {
		t.Fatalf("key = %x, %v", k, err)
	}
	if _, err := res.Document.PublicKey("ed25519-0000000000000000"); !errors.Is(err, didresolve.ErrNotFound) {
		t.Fatalf("unknown method: %v", err)
	}

	// Cached within the TTL, fetched again after it or after Invalidate.
	r.Resolve(t.Context(), "did:idn:acme")
	if hits.Load() != 1 {
		t.Fatalf("hits = %d, want 1 (cached)", hits.Load())
	}
	now = now.Add(2 * time.Minute)
	r.Resolve(t.Context(), "did:idn:acme")
	r.Invalidate("did:idn:acme")
	r.Resolve(t.Context(), "did:idn:acme")
	if hits.Load() != 3 {
		t.Fatalf("hits = %d, want 3", hits.Load())
	}

	if _, err := r.Resolve(t.Context(), "did:idn:nobody"); !errors.Is(err, didresolve.ErrNotFound) {
		t.Fatalf("unknown namespace: %v", err)
	}
	for _, bad := range []string{"did:web:acme", "did:idn:a", "did:idn:acme:svc", ""} {
		if _, err := r.Resolve(t.Context(), bad); !errors.Is(err, didresolve.ErrInvalidDID) {
			t.Fatalf("Resolve(%q) = %v, want ErrInvalidDID", bad, err)
		}
	}
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

func BenchmarkResolve(b *testing.B) {
	agents := []*identity.Identity{newAgent(b), newAgent(b), newAgent(b)}
	base, _ := controlPlane(b, agents...)
	b.Run("uncached HTTP", func(b *testing.B) {
		r := &didresolve.Resolver{BaseURL: base, TTL: -1}
		for b.Loop() {
			if _, err := r.Resolve(b.Context(), "did:idn:acme"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		r := &didresolve.Resolver{BaseURL: base}
		for b.Loop() {
			if _, err := r.Resolve(b.Context(), "did:idn:acme"); err != nil {
				b.Fatal(err)
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
	// A control plane on SQLite, seeded with one approved agent of "acme".
	dir, _ := os.MkdirTemp("", "didresolve-example")
	defer os.RemoveAll(dir)
	st, err := controlplane.Open(context.Background(), controlplane.StoreConfig{SQLitePath: filepath.Join(dir, "cp.db")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	srv, _ := controlplane.New(controlplane.Config{Store: st, JWTSecret: bytes.Repeat([]byte("s"), 32), TestSeedToken: seedToken})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	agent, _ := identity.New("acme")
	if err := seed(ts.URL, agent); err != nil {
		fmt.Println(err)
		return
	}

	// Any service can now resolve did:idn DIDs and check agent keys.
	r := &didresolve.Resolver{BaseURL: ts.URL, TTL: time.Minute}
	res, err := r.Resolve(context.Background(), "did:idn:acme")
	if err != nil {
		fmt.Println(err)
		return
	}
	key, err := res.Document.PublicKey(agent.Certificate.KeyID)
	fmt.Println(err == nil && key.Equal(agent.PublicKey), res.DocumentMetadata.Deactivated)
	// Output: true false
}
