package httpsig_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/idnhq/idn/httpsig"
)

// exampleKey is a fixed Ed25519 key, so that the examples print stable output.
var exampleKey = ed25519.NewKeyFromSeed([]byte("an example seed of 32 bytes!!!!!"))

// exampleNonces is a minimal in-memory NonceChecker. Production code bounds
// the memory and forgets entries after their until time.
type exampleNonces struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (n *exampleNonces) CheckNonce(_ context.Context, scope, nonce string, _ time.Time) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen[scope+" "+nonce] {
		return httpsig.ErrReplayDetected
	}
	n.seen[scope+" "+nonce] = true
	return nil
}

func ExampleSigner_SignRequest() {
	r, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/items?limit=10", strings.NewReader(`{"name":"x"}`))
	digest, _ := httpsig.ContentDigest(httpsig.DigestSHA256, []byte(`{"name":"x"}`))
	r.Header.Set("Content-Digest", digest)

	s := &httpsig.Signer{Key: httpsig.NewEd25519SigningKey(exampleKey)}
	err := s.SignRequest(r, httpsig.Params{
		Components: []httpsig.Component{{Name: "@method"}, {Name: "@target-uri"}, {Name: "content-digest"}},
		Created:    time.Unix(1700000000, 0),
		KeyID:      "key-1",
		Alg:        httpsig.AlgEd25519,
		Nonce:      "6f1d0c3a9b",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("Content-Digest:", r.Header.Get("Content-Digest"))
	fmt.Println("Signature-Input:", r.Header.Get("Signature-Input"))
	fmt.Println("Signature:", r.Header.Get("Signature"))
	// Output:
	// Content-Digest: sha-256=:AinTfjParhSb9AVDpc4dtEWdEPgw1ROSeaor/V9khaE=:
	// Signature-Input: sig1=("@method" "@target-uri" "content-digest");created=1700000000;keyid="key-1";alg="ed25519";nonce="6f1d0c3a9b"
	// Signature: sig1=:Akow7wp1hZKgklvQ6ZdD7G05g8rTcp1sQL/yqKbxCJU4umFY4FeEx2GNdIiuDnAoVkLnu5Dw6weRL1iJrtqlDw==:
}

func ExampleVerifier_Middleware() {
	pub := exampleKey.Public().(ed25519.PublicKey)
	v := &httpsig.Verifier{
		Keys: httpsig.KeyResolverFunc(func(_ context.Context, _ http.Header, p *httpsig.Params) (httpsig.VerifyingKey, error) {
			if p.KeyID != "key-1" {
				return nil, fmt.Errorf("unknown key %q", p.KeyID)
			}
			return httpsig.NewEd25519VerifyingKey(pub), nil
		}),
		Nonces:   &exampleNonces{seen: map[string]bool{}},
		Required: []httpsig.Component{{Name: "@method"}, {Name: "@target-uri"}},
	}
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ver, _ := httpsig.FromContext(r.Context())
		fmt.Fprintf(w, "hello %s", ver.Params.KeyID)
	})))
	defer srv.Close()

	send := func(nonce string) {
		r, _ := http.NewRequest(http.MethodGet, srv.URL+"/hello", nil)
		s := &httpsig.Signer{Key: httpsig.NewEd25519SigningKey(exampleKey)}
		s.SignRequest(r, httpsig.Params{
			Components: []httpsig.Component{{Name: "@method"}, {Name: "@target-uri"}},
			Created:    time.Now(),
			KeyID:      "key-1",
			Nonce:      nonce,
		})
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, strings.TrimSpace(string(body)))
	}
	send("nonce-0001")
	send("nonce-0001") // replayed
	// Output:
	// 200 hello key-1
	// 403 httpsig: replay detected
}

func ExampleTransport() {
	pub := exampleKey.Public().(ed25519.PublicKey)
	v := &httpsig.Verifier{
		Keys: httpsig.KeyResolverFunc(func(context.Context, http.Header, *httpsig.Params) (httpsig.VerifyingKey, error) {
			return httpsig.NewEd25519VerifyingKey(pub), nil
		}),
		Nonces:   &exampleNonces{seen: map[string]bool{}},
		Required: []httpsig.Component{{Name: "@method"}, {Name: "@target-uri"}, {Name: "content-digest"}},
	}
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "verified %d bytes", len(body))
	})))
	defer srv.Close()

	// With Params nil the Transport covers @method, @target-uri and, for a
	// body, content-digest, with a fresh nonce per request.
	client := &http.Client{Transport: &httpsig.Transport{
		Signer: &httpsig.Signer{Key: httpsig.NewEd25519SigningKey(exampleKey)},
	}}
	resp, err := client.Post(srv.URL+"/upload", "text/plain", strings.NewReader("twelve bytes"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// 200 verified 12 bytes
}

func ExampleContentDigest() {
	body := []byte(`{"hello": "world"}`)
	d, _ := httpsig.ContentDigest(httpsig.DigestSHA256, body)
	fmt.Println(d)
	fmt.Println(httpsig.VerifyContentDigest(d, body))
	fmt.Println(errors.Is(httpsig.VerifyContentDigest(d, []byte(`{"hello": "there"}`)), httpsig.ErrSignatureInvalid))
	// Output:
	// sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:
	// <nil>
	// true
}
