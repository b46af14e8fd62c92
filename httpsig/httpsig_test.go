package httpsig_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/httpsig"
)

// testNow is the fixed clock of the tests.
var testNow = time.Unix(1_800_000_000, 0)

// memNonces is a minimal NonceChecker for tests.
type memNonces struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func (n *memNonces) CheckNonce(_ context.Context, scope, nonce string, until time.Time) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen == nil {
		n.seen = map[string]time.Time{}
	}
	k := scope + "\x00" + nonce
	if _, ok := n.seen[k]; ok {
		return httpsig.ErrReplayDetected
	}
	n.seen[k] = until
	return nil
}

// wrapsSentinel reports whether err wraps one of the package's sentinels,
// as every verification error must.
func wrapsSentinel(err error) bool {
	for _, kind := range []error{httpsig.ErrHeadersInvalid, httpsig.ErrSignatureInvalid, httpsig.ErrComponentsInvalid,
		httpsig.ErrIdentityInvalid, httpsig.ErrNonceInvalid, httpsig.ErrReplayDetected, httpsig.ErrBodyTooLarge} {
		if errors.Is(err, kind) {
			return true
		}
	}
	return false
}

func staticKey(k httpsig.VerifyingKey) httpsig.KeyResolver {
	return httpsig.KeyResolverFunc(func(context.Context, http.Header, *httpsig.Params) (httpsig.VerifyingKey, error) {
		return k, nil
	})
}

var (
	testEdPub, testEdPriv, _ = ed25519.GenerateKey(rand.Reader)
	otherEdPub, _, _         = ed25519.GenerateKey(rand.Reader)
)

const testBody = `{"item":"apple","count":3}`

// newClientRequest returns the request a client would send.
func newClientRequest(t testing.TB) *http.Request {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, "https://api.example.com/v1/items?b=2&a=1", strings.NewReader(testBody))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	d, _ := httpsig.ContentDigest(httpsig.DigestSHA256, []byte(testBody))
	r.Header.Set("Content-Digest", d)
	return r
}

func defaultParams() httpsig.Params {
	return httpsig.Params{
		Components: []httpsig.Component{
			{Name: "@method"}, {Name: "@target-uri"}, {Name: "@authority"}, {Name: "@path"},
			{Name: "@query"}, {Name: "content-type"}, {Name: "content-digest"},
		},
		Created: testNow.Add(-10 * time.Second),
		KeyID:   "k1",
		Alg:     httpsig.AlgEd25519,
		Nonce:   "nonce-0001",
	}
}

// received writes r to the wire and parses it back as a server does.
func received(t testing.TB, r *http.Request) *http.Request {
	t.Helper()
	if r.GetBody != nil {
		r.Body, _ = r.GetBody()
	}
	var buf bytes.Buffer
	if err := r.Write(&buf); err != nil {
		t.Fatal(err)
	}
	sr, err := http.ReadRequest(bufio.NewReader(&buf))
	if err != nil {
		t.Fatal(err)
	}
	return sr
}

func httpsOrigin(r *http.Request) (string, string) { return "https", r.Host }

func newVerifier(k httpsig.VerifyingKey) *httpsig.Verifier {
	return &httpsig.Verifier{
		Keys:   staticKey(k),
		Nonces: &memNonces{},
		Clock:  func() time.Time { return testNow },
		Origin: httpsOrigin,
	}
}

func generateKeys(t testing.TB) map[string]struct {
	s httpsig.SigningKey
	v httpsig.VerifyingKey
} {
	t.Helper()
	out := map[string]struct {
		s httpsig.SigningKey
		v httpsig.VerifyingKey
	}{}
	add := func(s httpsig.SigningKey, v httpsig.VerifyingKey, err1, err2 error) {
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		out[s.Algorithm()] = struct {
			s httpsig.SigningKey
			v httpsig.VerifyingKey
		}{s, v}
	}
	add(httpsig.NewEd25519SigningKey(testEdPriv), httpsig.NewEd25519VerifyingKey(testEdPub), nil, nil)
	for _, c := range []elliptic.Curve{elliptic.P256(), elliptic.P384()} {
		k, err := ecdsa.GenerateKey(c, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		s, err1 := httpsig.NewECDSASigningKey(k)
		v, err2 := httpsig.NewECDSAVerifyingKey(&k.PublicKey)
		add(s, v, err1, err2)
	}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s, err1 := httpsig.NewRSAPSSSigningKey(rk)
	v, err2 := httpsig.NewRSAPSSVerifyingKey(&rk.PublicKey)
	add(s, v, err1, err2)
	s, err1 = httpsig.NewRSAV15SigningKey(rk)
	v, err2 = httpsig.NewRSAV15VerifyingKey(&rk.PublicKey)
	add(s, v, err1, err2)
	hk, err := httpsig.NewHMACKey(bytes.Repeat([]byte{7}, 32))
	add(hk, hk, err, nil)
	return out
}

func TestRoundTripEveryAlgorithm(t *testing.T) {
	keys := generateKeys(t)
	for _, alg := range []string{
		httpsig.AlgEd25519, httpsig.AlgECDSAP256SHA256, httpsig.AlgECDSAP384SHA384,
		httpsig.AlgHMACSHA256, httpsig.AlgRSAPSSSHA512, httpsig.AlgRSAV15SHA256,
	} {
		t.Run(alg, func(t *testing.T) {
			k, ok := keys[alg]
			if !ok {
				t.Fatalf("no key for %s", alg)
			}
			r := newClientRequest(t)
			p := defaultParams()
			p.Alg = alg
			if err := (&httpsig.Signer{Key: k.s}).SignRequest(r, p); err != nil {
				t.Fatal(err)
			}
			sr := received(t, r)
			ver, err := newVerifier(k.v).VerifyRequest(sr)
			if err != nil {
				t.Fatal(err)
			}
			if ver.Label != "sig1" || ver.Params.Alg != alg || ver.Params.KeyID != "k1" || ver.Key != k.v {
				t.Fatalf("Verified = %+v", ver)
			}
			if want := p.Created.Add(5 * time.Minute); !ver.NonceUntil.Equal(want) {
				t.Fatalf("NonceUntil = %v, want %v", ver.NonceUntil, want)
			}
			body, _ := io.ReadAll(sr.Body)
			if string(body) != testBody {
				t.Fatalf("body after verification = %q", body)
			}
			// The same signature checked with another algorithm's key fails.
			for other, ok2 := range keys {
				if other == alg {
					continue
				}
				v := newVerifier(ok2.v)
				if _, err := v.VerifyRequest(received(t, r)); err == nil {
					t.Fatalf("verified with a %s key", other)
				}
			}
		})
	}
}

type negativeCase struct {
	name     string
	params   func(p *httpsig.Params)
	sign     func(t testing.TB, r *http.Request) // replaces the default signing
	tamper   func(r *http.Request)               // on the received request
	verifier func(v *httpsig.Verifier)
	want     error
}

func TestVerifyRejects(t *testing.T) {
	edSigner := &httpsig.Signer{Key: httpsig.NewEd25519SigningKey(testEdPriv)}
	cases := []negativeCase{
		{name: "tampered method", tamper: func(r *http.Request) { r.Method = http.MethodPut }, want: httpsig.ErrSignatureInvalid},
		{name: "tampered path", tamper: func(r *http.Request) { r.RequestURI = "/v1/admin?b=2&a=1" }, want: httpsig.ErrSignatureInvalid},
		{name: "tampered query", tamper: func(r *http.Request) { r.RequestURI = "/v1/items?b=2&a=9" }, want: httpsig.ErrSignatureInvalid},
		{name: "tampered host", tamper: func(r *http.Request) { r.Host = "evil.example.com" }, want: httpsig.ErrSignatureInvalid},
		{name: "host gains an explicit default port (target-uri differs)", tamper: func(r *http.Request) { r.Host = "api.example.com:443" }, want: httpsig.ErrSignatureInvalid},
		{name: "absolute-form target claims https over a plain-HTTP connection", tamper: func(r *http.Request) {
			r.RequestURI = "https://api.example.com/v1/items?b=2&a=1"
		}, verifier: func(v *httpsig.Verifier) { v.Origin = func(r *http.Request) (string, string) { return "http", r.Host } }, want: httpsig.ErrSignatureInvalid},
		{name: "absolute-form target names the signed authority, origin is another", tamper: func(r *http.Request) {
			r.RequestURI = "https://api.example.com/v1/items?b=2&a=1"
		}, verifier: func(v *httpsig.Verifier) {
			v.Origin = func(*http.Request) (string, string) { return "https", "gw.example" }
		}, want: httpsig.ErrSignatureInvalid},
		{name: "tampered covered header", tamper: func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, want: httpsig.ErrSignatureInvalid},
		{name: "covered header appended line", tamper: func(r *http.Request) { r.Header.Add("Content-Type", "text/plain") }, want: httpsig.ErrSignatureInvalid},
		{name: "tampered body", tamper: func(r *http.Request) { r.Body = io.NopCloser(strings.NewReader(`{"item":"apple","count":300}`)) }, want: httpsig.ErrSignatureInvalid},
		{name: "content-digest swapped with body", tamper: func(r *http.Request) {
			const evil = `{"item":"pear"}`
			d, _ := httpsig.ContentDigest(httpsig.DigestSHA256, []byte(evil))
			r.Header.Set("Content-Digest", d)
			r.Body = io.NopCloser(strings.NewReader(evil))
		}, want: httpsig.ErrSignatureInvalid},
		{name: "covered header removed", tamper: func(r *http.Request) { r.Header.Del("Content-Type") }, want: httpsig.ErrComponentsInvalid},
		{name: "wrong key", verifier: func(v *httpsig.Verifier) { v.Keys = staticKey(httpsig.NewEd25519VerifyingKey(otherEdPub)) }, want: httpsig.ErrSignatureInvalid},
		{name: "created too old", params: func(p *httpsig.Params) { p.Created = testNow.Add(-5*time.Minute - time.Second) }, want: httpsig.ErrSignatureInvalid},
		{name: "created too new", params: func(p *httpsig.Params) { p.Created = testNow.Add(31 * time.Second) }, want: httpsig.ErrSignatureInvalid},
		{name: "expired", params: func(p *httpsig.Params) { p.Expires = testNow.Add(-time.Second) }, want: httpsig.ErrSignatureInvalid},
		{name: "missing created", params: func(p *httpsig.Params) { p.Created = time.Time{} }, want: httpsig.ErrSignatureInvalid},
		{name: "created rewritten in Signature-Input", tamper: func(r *http.Request) {
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), ";created=", ";created=1", 1))
		}, verifier: func(v *httpsig.Verifier) { v.Clock = func() time.Time { return time.Unix(11_800_000_000, 0) } }, want: httpsig.ErrSignatureInvalid},
		{name: "covered component dropped from Signature-Input", tamper: func(r *http.Request) {
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), ` "content-digest"`, "", 1))
		}, want: httpsig.ErrSignatureInvalid},
		{name: "duplicate Signature-Input header lines", tamper: func(r *http.Request) {
			r.Header.Add("Signature-Input", r.Header.Get("Signature-Input"))
		}, want: httpsig.ErrHeadersInvalid},
		{name: "duplicate Signature header lines", tamper: func(r *http.Request) { r.Header.Add("Signature", r.Header.Get("Signature")) }, want: httpsig.ErrHeadersInvalid},
		{name: "missing Signature-Input", tamper: func(r *http.Request) { r.Header.Del("Signature-Input") }, want: httpsig.ErrHeadersInvalid},
		{name: "missing Signature", tamper: func(r *http.Request) { r.Header.Del("Signature") }, want: httpsig.ErrHeadersInvalid},
		{name: "malformed Signature-Input structured field", tamper: func(r *http.Request) { r.Header.Set("Signature-Input", `sig1=("@method" "@path";created=1`) }, want: httpsig.ErrHeadersInvalid},
		{name: "malformed Signature structured field", tamper: func(r *http.Request) { r.Header.Set("Signature", "sig1=:not base64!:") }, want: httpsig.ErrHeadersInvalid},
		{name: "Signature member is not a byte sequence", tamper: func(r *http.Request) { r.Header.Set("Signature", `sig1="abc"`) }, want: httpsig.ErrHeadersInvalid},
		{name: "Signature-Input member is not an inner list", tamper: func(r *http.Request) { r.Header.Set("Signature-Input", `sig1="@method"`) }, want: httpsig.ErrHeadersInvalid},
		{name: "created is not an integer", tamper: func(r *http.Request) {
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), ";created=1799999990", `;created="1799999990"`, 1))
		}, want: httpsig.ErrHeadersInvalid},
		{name: "labels of the two fields differ", tamper: func(r *http.Request) {
			r.Header.Set("Signature", strings.Replace(r.Header.Get("Signature"), "sig1=", "sig2=", 1))
		}, want: httpsig.ErrHeadersInvalid},
		{name: "two signatures with Label empty", sign: func(t testing.TB, r *http.Request) {
			if err := edSigner.SignRequest(r, defaultParams()); err != nil {
				t.Fatal(err)
			}
			s2 := &httpsig.Signer{Key: httpsig.NewEd25519SigningKey(testEdPriv), Label: "sig2"}
			if err := s2.SignRequest(r, defaultParams()); err != nil {
				t.Fatal(err)
			}
		}, want: httpsig.ErrHeadersInvalid},
		{name: "selected label absent", verifier: func(v *httpsig.Verifier) { v.Label = "other" }, want: httpsig.ErrHeadersInvalid},
		{name: "unknown derived component", tamper: func(r *http.Request) {
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), `"@path"`, `"@fragment"`, 1))
		}, want: httpsig.ErrComponentsInvalid},
		{name: "unknown component parameter", tamper: func(r *http.Request) {
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), `"content-type"`, `"content-type";lang`, 1))
		}, want: httpsig.ErrComponentsInvalid},
		{name: "upper-case component name", tamper: func(r *http.Request) {
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), `"content-type"`, `"Content-Type"`, 1))
		}, want: httpsig.ErrComponentsInvalid},
		{name: "component listed twice", tamper: func(r *http.Request) {
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), `"@path"`, `"@path" "@path"`, 1))
		}, want: httpsig.ErrComponentsInvalid},
		{name: "covered component flood", tamper: func(r *http.Request) {
			var many strings.Builder
			for i := range 65 {
				fmt.Fprintf(&many, ` "x-h%d"`, i)
			}
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), `"@path"`, `"@path"`+many.String(), 1))
		}, want: httpsig.ErrComponentsInvalid},
		{name: "status in a request", tamper: func(r *http.Request) {
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), `"@path"`, `"@status"`, 1))
		}, want: httpsig.ErrComponentsInvalid},
		{name: "req parameter in a request", tamper: func(r *http.Request) {
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), `"@path"`, `"@path";req`, 1))
		}, want: httpsig.ErrComponentsInvalid},
		{name: "required component not covered", params: func(p *httpsig.Params) { p.Components = p.Components[:4] },
			verifier: func(v *httpsig.Verifier) {
				v.Required = []httpsig.Component{{Name: "@method"}, {Name: "content-digest"}}
			}, want: httpsig.ErrComponentsInvalid},
		{name: "alg mismatch", tamper: func(r *http.Request) {
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), `alg="ed25519"`, `alg="hmac-sha256"`, 1))
		}, want: httpsig.ErrSignatureInvalid},
		{name: "nil resolver", verifier: func(v *httpsig.Verifier) { v.Keys = nil }, want: httpsig.ErrIdentityInvalid},
		{name: "resolver fails", verifier: func(v *httpsig.Verifier) {
			v.Keys = httpsig.KeyResolverFunc(func(context.Context, http.Header, *httpsig.Params) (httpsig.VerifyingKey, error) {
				return nil, errors.New("unknown keyid")
			})
		}, want: httpsig.ErrIdentityInvalid},
		{name: "nil nonce checker", verifier: func(v *httpsig.Verifier) { v.Nonces = nil }, want: httpsig.ErrNonceInvalid},
		{name: "missing nonce", params: func(p *httpsig.Params) { p.Nonce = "" }, want: httpsig.ErrNonceInvalid},
		{name: "nonce is not a string", tamper: func(r *http.Request) {
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), `nonce="nonce-0001"`, `nonce=1`, 1))
		}, want: httpsig.ErrNonceInvalid},
		{name: "body over MaxBodyBytes", verifier: func(v *httpsig.Verifier) { v.MaxBodyBytes = 8 }, want: httpsig.ErrBodyTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newClientRequest(t)
			if tc.sign != nil {
				tc.sign(t, r)
			} else {
				p := defaultParams()
				if tc.params != nil {
					tc.params(&p)
				}
				if err := edSigner.SignRequest(r, p); err != nil {
					t.Fatal(err)
				}
			}
			sr := received(t, r)
			if tc.tamper != nil {
				tc.tamper(sr)
			}
			v := newVerifier(httpsig.NewEd25519VerifyingKey(testEdPub))
			if tc.verifier != nil {
				tc.verifier(v)
			}
			ver, err := v.VerifyRequest(sr)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if ver != nil {
				t.Fatal("Verified returned with an error")
			}
			if !wrapsSentinel(err) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
		})
	}
}

func TestReplayDetected(t *testing.T) {
	r := newClientRequest(t)
	if err := (&httpsig.Signer{Key: httpsig.NewEd25519SigningKey(testEdPriv)}).SignRequest(r, defaultParams()); err != nil {
		t.Fatal(err)
	}
	v := newVerifier(httpsig.NewEd25519VerifyingKey(testEdPub))
	if _, err := v.VerifyRequest(received(t, r)); err != nil {
		t.Fatal(err)
	}
	_, err := v.VerifyRequest(received(t, r))
	if !errors.Is(err, httpsig.ErrReplayDetected) {
		t.Fatalf("replayed request: %v", err)
	}
	// InsecureSkipNonceCheck leaves replay protection to the caller.
	v.InsecureSkipNonceCheck = true
	if _, err := v.VerifyRequest(received(t, r)); err != nil {
		t.Fatal(err)
	}
}

func TestSelectLabel(t *testing.T) {
	other, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	r := newClientRequest(t)
	if err := (&httpsig.Signer{Key: httpsig.NewEd25519SigningKey(testEdPriv)}).SignRequest(r, defaultParams()); err != nil {
		t.Fatal(err)
	}
	p := defaultParams()
	p.Nonce = "nonce-0002"
	if err := (&httpsig.Signer{Key: httpsig.NewEd25519SigningKey(otherPriv), Label: "proxy"}).SignRequest(r, p); err != nil {
		t.Fatal(err)
	}
	if got := r.Header.Values("Signature-Input"); len(got) != 1 || !strings.HasPrefix(got[0], "sig1=(") || !strings.Contains(got[0], ", proxy=(") {
		t.Fatalf("Signature-Input = %q", got)
	}
	if err := (&httpsig.Signer{Key: httpsig.NewEd25519SigningKey(otherPriv), Label: "proxy"}).SignRequest(r, p); err == nil {
		t.Fatal("label reused")
	}
	for label, key := range map[string]ed25519.PublicKey{"sig1": testEdPub, "proxy": other} {
		v := newVerifier(httpsig.NewEd25519VerifyingKey(key))
		v.Label = label
		ver, err := v.VerifyRequest(received(t, r))
		if err != nil || ver.Label != label {
			t.Fatalf("label %s: %v", label, err)
		}
	}
}

func TestLowercaseMethodProfile(t *testing.T) {
	pub := httpsig.NewEd25519VerifyingKey(testEdPub)
	for _, tc := range []struct {
		name           string
		signLower      bool
		acceptLower    bool
		method         string
		wantErr        error
		wantBaseMethod string
	}{
		{name: "profile signer, profile verifier", signLower: true, acceptLower: true, method: "POST"},
		{name: "RFC signer, profile verifier", acceptLower: true, method: "POST"},
		{name: "RFC signer, RFC verifier", method: "POST"},
		{name: "profile signer, RFC verifier", signLower: true, method: "POST", wantErr: httpsig.ErrSignatureInvalid},
		{name: "lower-case method on the wire", signLower: true, method: "post"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newClientRequest(t)
			r.Method = tc.method
			s := &httpsig.Signer{Key: httpsig.NewEd25519SigningKey(testEdPriv), LowercaseMethod: tc.signLower}
			if err := s.SignRequest(r, defaultParams()); err != nil {
				t.Fatal(err)
			}
			v := newVerifier(pub)
			v.AcceptLowercaseMethod = tc.acceptLower
			_, err := v.VerifyRequest(received(t, r))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestResponseSignatureCoveringRequest(t *testing.T) {
	req := received(t, newClientRequest(t))
	resp := &http.Response{
		StatusCode: http.StatusCreated,
		Header:     http.Header{"Content-Type": {"application/json"}},
		Body:       io.NopCloser(strings.NewReader(`{"id":7}`)),
	}
	d, _ := httpsig.ContentDigest(httpsig.DigestSHA512, []byte(`{"id":7}`))
	resp.Header.Set("Content-Digest", d)
	p := httpsig.Params{
		Components: []httpsig.Component{
			{Name: "@status"}, {Name: "content-digest"}, {Name: "@method", Req: true},
			{Name: "@path", Req: true}, {Name: "content-digest", Req: true},
		},
		Created: testNow,
		Nonce:   "response-nonce",
	}
	s := &httpsig.Signer{Key: httpsig.NewEd25519SigningKey(testEdPriv)}
	if err := s.SignResponse(resp, nil, p); err == nil {
		t.Fatal("signed ;req components without the request")
	}
	if err := s.SignResponse(resp, req, p); err != nil {
		t.Fatal(err)
	}
	want := `sig1=("@status" "content-digest" "@method";req "@path";req "content-digest";req);created=1800000000;nonce="response-nonce"`
	if got := resp.Header.Get("Signature-Input"); got != want {
		t.Fatalf("Signature-Input = %s\nwant %s", got, want)
	}
	v := newVerifier(httpsig.NewEd25519VerifyingKey(testEdPub))
	if _, err := v.VerifyResponse(resp, req); err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != `{"id":7}` {
		t.Fatalf("body = %q", body)
	}

	other := received(t, newClientRequest(t))
	other.RequestURI = "/v1/other"
	v.InsecureSkipNonceCheck = true
	if _, err := v.VerifyResponse(resp, other); !errors.Is(err, httpsig.ErrSignatureInvalid) {
		t.Fatalf("response replayed for another request: %v", err)
	}
	if _, err := v.VerifyResponse(resp, nil); !errors.Is(err, httpsig.ErrComponentsInvalid) {
		t.Fatalf("no request: %v", err)
	}
}

func TestSignerRejects(t *testing.T) {
	hk, _ := httpsig.NewHMACKey(make([]byte, 32))
	for _, tc := range []struct {
		name   string
		signer httpsig.Signer
		params func(p *httpsig.Params)
	}{
		{name: "nil key", signer: httpsig.Signer{}},
		{name: "alg does not match key", signer: httpsig.Signer{Key: hk}},
		{name: "label is not a key", signer: httpsig.Signer{Key: httpsig.NewEd25519SigningKey(testEdPriv), Label: "Sig 1"}},
		{name: "unknown derived component", params: func(p *httpsig.Params) { p.Components = append(p.Components, httpsig.Component{Name: "@fragment"}) }},
		{name: "upper-case field", params: func(p *httpsig.Params) { p.Components = append(p.Components, httpsig.Component{Name: "Accept"}) }},
		{name: "absent field", params: func(p *httpsig.Params) { p.Components = append(p.Components, httpsig.Component{Name: "accept"}) }},
		{name: "duplicate component", params: func(p *httpsig.Params) { p.Components = append(p.Components, httpsig.Component{Name: "@method"}) }},
		{name: "status in request", params: func(p *httpsig.Params) { p.Components = append(p.Components, httpsig.Component{Name: "@status"}) }},
		{name: "query-param without name", params: func(p *httpsig.Params) { p.Components = append(p.Components, httpsig.Component{Name: "@query-param"}) }},
		{name: "bs with sf", params: func(p *httpsig.Params) {
			p.Components = append(p.Components, httpsig.Component{Name: "content-digest", BS: true, SF: true})
		}},
		{name: "nonce with a control character", params: func(p *httpsig.Params) { p.Nonce = "a\nb" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.signer
			if s.Key == nil && tc.name != "nil key" {
				s.Key = httpsig.NewEd25519SigningKey(testEdPriv)
			}
			p := defaultParams()
			if tc.params != nil {
				tc.params(&p)
			}
			r := newClientRequest(t)
			if err := s.SignRequest(r, p); err == nil {
				t.Fatal("signed")
			}
			if r.Header.Get("Signature") != "" || r.Header.Get("Signature-Input") != "" {
				t.Fatal("failed signing left headers behind")
			}
		})
	}
}

func TestKeyConstructorsReject(t *testing.T) {
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	p224, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	checks := map[string]error{}
	_, checks["rsa 1024 pss"] = httpsig.NewRSAPSSSigningKey(small)
	_, checks["rsa 1024 v1.5 public"] = httpsig.NewRSAV15VerifyingKey(&small.PublicKey)
	_, checks["ecdsa p224"] = httpsig.NewECDSASigningKey(p224)
	_, checks["ecdsa p224 public"] = httpsig.NewECDSAVerifyingKey(&p224.PublicKey)
	_, checks["hmac short"] = httpsig.NewHMACKey(make([]byte, 31))
	_, checks["ecdsa nil"] = httpsig.NewECDSASigningKey(nil)
	for name, err := range checks {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := httpsig.NewEd25519SigningKey(ed25519.PrivateKey{1, 2}).Sign(nil); err == nil {
		t.Error("short ed25519 key signed")
	}
	if err := httpsig.NewEd25519VerifyingKey(ed25519.PublicKey{1}).Verify(nil, make([]byte, 64)); err == nil {
		t.Error("short ed25519 key verified")
	}
}

// TestForeignSignatureParams verifies a signature made by another RFC 9421
// implementation that orders parameters differently and adds one this
// package does not know: @signature-params must be rebuilt as received.
func TestForeignSignatureParams(t *testing.T) {
	const input = `("@method" "@path" "content-type";sf;bs);nonce="n-1";x-vendor=?1;keyid="k1";created=1799999990;tag="other"`
	r := received(t, newClientRequest(t))
	// The bs-and-sf combination is invalid, so the verifier must refuse
	// before any cryptography; the valid variant below must pass.
	r.Header.Set("Signature-Input", "sig1="+input)
	r.Header.Set("Signature", "sig1=:AAAA:")
	if _, err := newVerifier(httpsig.NewEd25519VerifyingKey(testEdPub)).VerifyRequest(r); !errors.Is(err, httpsig.ErrComponentsInvalid) {
		t.Fatalf("sf with bs: %v", err)
	}

	const valid = `("@method" "@path" "content-type";bs);nonce="n-1";x-vendor=?1;keyid="k1";created=1799999990;tag="other";x-num=1.50`
	base := strings.Join([]string{
		`"@method": POST`,
		`"@path": /v1/items`,
		`"content-type";bs: :YXBwbGljYXRpb24vanNvbg==:`,
		`"@signature-params": ("@method" "@path" "content-type";bs);nonce="n-1";x-vendor;keyid="k1";created=1799999990;tag="other";x-num=1.5`,
	}, "\n")
	sig := ed25519.Sign(testEdPriv, []byte(base))
	r.Header.Set("Signature-Input", "sig1="+valid)
	r.Header.Set("Signature", "sig1=:"+base64.StdEncoding.EncodeToString(sig)+":")
	ver, err := newVerifier(httpsig.NewEd25519VerifyingKey(testEdPub)).VerifyRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	if ver.Params.Tag != "other" || ver.Params.Nonce != "n-1" || len(ver.Params.Components) != 3 || !ver.Params.Components[2].BS {
		t.Fatalf("Params = %+v", ver.Params)
	}
}

// TestTrailerComponent signs a trailer field sent after a chunked body.
func TestTrailerComponent(t *testing.T) {
	v := newVerifier(httpsig.NewEd25519VerifyingKey(testEdPub))
	v.Clock = nil
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(r.Trailer.Get("X-Checksum")))
	})))
	defer srv.Close()

	r, _ := http.NewRequest(http.MethodPut, srv.URL+"/blob", io.MultiReader(strings.NewReader("chunked body")))
	r.ContentLength = -1
	r.Trailer = http.Header{"X-Checksum": {"c0ffee"}}
	p := httpsig.Params{
		Components: []httpsig.Component{{Name: "@method"}, {Name: "x-checksum", TR: true}},
		Created:    time.Now(),
		Nonce:      "trailer-nonce",
	}
	if err := (&httpsig.Signer{Key: httpsig.NewEd25519SigningKey(testEdPriv)}).SignRequest(r, p); err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "c0ffee" {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
}
