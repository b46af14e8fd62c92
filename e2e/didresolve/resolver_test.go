// Package didresolve_test resolves DIDs against a real control plane on
// SQLite. It lives in the e2e module, not beside package didresolve, so
// that the module a gateway user imports does not require the control
// plane's database drivers; didresolve's own tests use stand-ins.
package didresolve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
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
