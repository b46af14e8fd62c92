package httpsig_test

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"testing"
	"time"

	"github.com/idnhq/idn/httpsig"
)

// The benchmarks compare a full sign / verify of a small GET covering six
// components with the bare Ed25519 operation over the same signature base.

var benchComponents = []httpsig.Component{
	{Name: "@method"}, {Name: "@target-uri"}, {Name: "idn-namespace"},
	{Name: "idn-subject"}, {Name: "idn-agent-key"}, {Name: "idn-agent-cert"},
}

func benchRequest(b *testing.B) *http.Request {
	r, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:38100/proxy/github/user?x=1", nil)
	if err != nil {
		b.Fatal(err)
	}
	r.Header.Set("Idn-Namespace", "acme")
	r.Header.Set("Idn-Subject", "acme")
	r.Header.Set("Idn-Agent-Key", "ed25519:JrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs=")
	r.Header.Set("Idn-Agent-Cert", "eyJ2ZXJzaW9uIjoxLCJuYW1lc3BhY2UiOiJhY21lIiwiZGlkIjoiZGlkOmtleTp6Nk1rZXhhbXBsZSIsImtleUlkIjoiazEiLCJwdWJsaWNLZXkiOiJKclFMajVQLzg5aVhFUzkrdkZnckl5MjljbEY5Q0Mvb1BQc3czYzVEMGJzPSIsImlzc3VlZEF0IjoiMjAyNi0wMS0wMVQwMDowMDowMFoiLCJzaWduYXR1cmUiOiJBQUFBIn0")
	return r
}

func benchParams() httpsig.Params {
	return httpsig.Params{
		Components: benchComponents,
		Created:    testNow,
		KeyID:      "k1",
		Alg:        httpsig.AlgEd25519,
		Nonce:      "bench-nonce-0001",
	}
}

// benchBase returns the signature base the benchmarks sign and verify.
func benchBase(b *testing.B) []byte {
	var base []byte
	key := baseCapture{}
	r := benchRequest(b)
	if err := (&httpsig.Signer{Key: &key}).SignRequest(r, benchParams()); err != nil {
		b.Fatal(err)
	}
	base = key.base
	return base
}

// baseCapture is a SigningKey that records the base it is given.
type baseCapture struct{ base []byte }

func (*baseCapture) Algorithm() string { return httpsig.AlgEd25519 }
func (c *baseCapture) Sign(base []byte) ([]byte, error) {
	c.base = append([]byte(nil), base...)
	return make([]byte, ed25519.SignatureSize), nil
}

func BenchmarkEd25519SignRaw(b *testing.B) {
	base := benchBase(b)
	b.ReportAllocs()
	for b.Loop() {
		ed25519.Sign(testEdPriv, base)
	}
}

func BenchmarkSignRequest(b *testing.B) {
	benchSign(b, httpsig.NewEd25519SigningKey(testEdPriv))
}

func benchSign(b *testing.B, key httpsig.SigningKey) {
	s := &httpsig.Signer{Key: key}
	r := benchRequest(b)
	p := benchParams()
	b.ReportAllocs()
	for b.Loop() {
		delete(r.Header, "Signature-Input")
		delete(r.Header, "Signature")
		if err := s.SignRequest(r, p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEd25519VerifyRaw(b *testing.B) {
	base := benchBase(b)
	sig := ed25519.Sign(testEdPriv, base)
	b.ReportAllocs()
	for b.Loop() {
		if !ed25519.Verify(testEdPub, base, sig) {
			b.Fatal("verify failed")
		}
	}
}

type acceptNonces struct{}

func (acceptNonces) CheckNonce(context.Context, string, string, time.Time) error { return nil }

func BenchmarkVerifyRequest(b *testing.B) {
	benchVerify(b, httpsig.NewEd25519SigningKey(testEdPriv), httpsig.NewEd25519VerifyingKey(testEdPub))
}

func benchVerify(b *testing.B, sk httpsig.SigningKey, vk httpsig.VerifyingKey) {
	r := benchRequest(b)
	if err := (&httpsig.Signer{Key: sk}).SignRequest(r, benchParams()); err != nil {
		b.Fatal(err)
	}
	sr := received(b, r)
	v := &httpsig.Verifier{
		Keys:   staticKey(vk),
		Nonces: acceptNonces{},
		Clock:  func() time.Time { return testNow },
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.VerifyRequest(sr); err != nil {
			b.Fatal(err)
		}
	}
}

// nopKey signs and verifies nothing: it isolates the cost of the package
// around the signature algorithm.
type nopKey struct{}

func (nopKey) Algorithm() string                { return httpsig.AlgEd25519 }
func (nopKey) Sign(base []byte) ([]byte, error) { return make([]byte, 64), nil }
func (nopKey) Verify(base, sig []byte) error    { return nil }

// BenchmarkSignRequestOverhead and BenchmarkVerifyRequestOverhead measure
// what the package adds around the algorithm, with a key that does nothing.
func BenchmarkSignRequestOverhead(b *testing.B) { benchSign(b, nopKey{}) }

func BenchmarkVerifyRequestOverhead(b *testing.B) { benchVerify(b, nopKey{}, nopKey{}) }
