package httpsig

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
)

type appendixVector struct {
	Section        string   `json:"section"`
	Title          string   `json:"title"`
	Label          string   `json:"label"`
	KeyID          string   `json:"keyid"`
	Alg            string   `json:"alg"`
	Message        string   `json:"message"`
	Deterministic  bool     `json:"deterministic"`
	SignatureBase  []string `json:"signature_base"`
	SignatureInput string   `json:"signature_input"`
	Signature      string   `json:"signature"`
}

// rfcKeys are the RFC 9421 Appendix B.1 keys, parsed from testdata.
type rfcKeys struct {
	signing   map[string]SigningKey
	verifying map[string]VerifyingKey
}

func pemBlocks(t testing.TB, name string) map[string][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "rfc9421", name))
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string][]byte{}
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return blocks
		}
		blocks[b.Type] = b.Bytes
	}
}

// must panics on error; it is only for fixed test data.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func loadRFCKeys(t testing.TB) *rfcKeys {
	t.Helper()
	k := &rfcKeys{signing: map[string]SigningKey{}, verifying: map[string]VerifyingKey{}}

	b := pemBlocks(t, "test-key-rsa.pem")
	rsaPub := must(x509.ParsePKCS1PublicKey(b["RSA PUBLIC KEY"]))
	rsaPriv := must(x509.ParsePKCS1PrivateKey(b["RSA PRIVATE KEY"]))
	k.verifying["test-key-rsa"] = must(NewRSAV15VerifyingKey(rsaPub))
	k.signing["test-key-rsa"] = must(NewRSAV15SigningKey(rsaPriv))

	b = pemBlocks(t, "test-key-rsa-pss.pem")
	pssPub := must(x509.ParsePKIXPublicKey(b["PUBLIC KEY"])).(*rsa.PublicKey)
	k.verifying["test-key-rsa-pss"] = must(NewRSAPSSVerifyingKey(pssPub))
	k.signing["test-key-rsa-pss"] = must(NewRSAPSSSigningKey(parsePSSPrivateKey(t, b["PRIVATE KEY"])))

	b = pemBlocks(t, "test-key-ecc-p256.pem")
	ecPub := must(x509.ParsePKIXPublicKey(b["PUBLIC KEY"])).(*ecdsa.PublicKey)
	ecPriv := must(x509.ParseECPrivateKey(b["EC PRIVATE KEY"]))
	k.verifying["test-key-ecc-p256"] = must(NewECDSAVerifyingKey(ecPub))
	k.signing["test-key-ecc-p256"] = must(NewECDSASigningKey(ecPriv))

	b = pemBlocks(t, "test-key-ed25519.pem")
	edPub := must(x509.ParsePKIXPublicKey(b["PUBLIC KEY"])).(ed25519.PublicKey)
	edPriv := must(x509.ParsePKCS8PrivateKey(b["PRIVATE KEY"])).(ed25519.PrivateKey)
	k.verifying["test-key-ed25519"] = NewEd25519VerifyingKey(edPub)
	k.signing["test-key-ed25519"] = NewEd25519SigningKey(edPriv)

	secretB64 := must(os.ReadFile(filepath.Join("testdata", "rfc9421", "test-shared-secret.b64")))
	secret := must(base64.StdEncoding.DecodeString(strings.TrimSpace(string(secretB64))))
	hk := must(NewHMACKey(secret))
	k.verifying["test-shared-secret"] = hk
	k.signing["test-shared-secret"] = hk
	return k
}

// parsePSSPrivateKey reads a PKCS#8 key with the id-RSASSA-PSS algorithm
// identifier (RFC 4055), which crypto/x509 does not accept: the wrapped key
// is an ordinary PKCS#1 RSAPrivateKey.
func parsePSSPrivateKey(t testing.TB, der []byte) *rsa.PrivateKey {
	t.Helper()
	var p8 struct {
		Version    int
		Algorithm  pkix.AlgorithmIdentifier
		PrivateKey []byte
	}
	if _, err := asn1.Unmarshal(der, &p8); err != nil {
		t.Fatal(err)
	}
	if !p8.Algorithm.Algorithm.Equal(asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 10}) {
		t.Fatalf("algorithm %v is not id-RSASSA-PSS", p8.Algorithm.Algorithm)
	}
	return must(x509.ParsePKCS1PrivateKey(p8.PrivateKey))
}

func (k *rfcKeys) resolver() KeyResolver {
	return KeyResolverFunc(func(_ context.Context, _ http.Header, p *Params) (VerifyingKey, error) {
		if key, ok := k.verifying[p.KeyID]; ok {
			return key, nil
		}
		return nil, os.ErrNotExist
	})
}

// readTestMessage parses an RFC test message as a server would receive it.
func readTestMessage(t testing.TB, name string) (*http.Request, *http.Response) {
	t.Helper()
	raw := must(os.ReadFile(filepath.Join("testdata", "rfc9421", name)))
	br := bufio.NewReader(bytes.NewReader(raw))
	if bytes.HasPrefix(raw, []byte("HTTP/")) {
		return nil, must(http.ReadResponse(br, nil))
	}
	return must(http.ReadRequest(br)), nil
}

func loadAppendixVectors(t testing.TB, file string, n int) []appendixVector {
	t.Helper()
	var f struct {
		Vectors []appendixVector `json:"vectors"`
	}
	data := must(os.ReadFile(filepath.Join("testdata", "rfc9421", file)))
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) != n {
		t.Fatalf("%s: want %d vectors, got %d", file, n, len(f.Vectors))
	}
	return f.Vectors
}

// TestRFC9421AppendixB runs RFC 9421 Appendix B.2.1-B.2.6 and B.3: the verifier
// rebuilds the published signature base byte for byte and accepts the
// published signature; the signer emits the same Signature-Input and a
// signature that verifies, identical to the published one for the
// deterministic algorithms (B.2.5 hmac-sha256, B.2.6 ed25519).
func TestRFC9421AppendixB(t *testing.T) {
	keys := loadRFCKeys(t)
	created := time.Unix(1618884473, 0)
	vecs := append(loadAppendixVectors(t, "appendix-b2.json", 6), loadAppendixVectors(t, "appendix-b3.json", 1)...)
	for _, vec := range vecs {
		t.Run(vec.Section, func(t *testing.T) {
			wantBase := strings.Join(vec.SignatureBase, "\n")
			req, resp := readTestMessage(t, vec.Message)
			var h http.Header
			var m *message
			if resp != nil {
				h = resp.Header
				m = responseMessage(resp, nil)
			} else {
				h = req.Header
				m = requestMessage(req, httpsOrigin)
			}

			// Verifier side: base from the received Signature-Input.
			h.Set("Signature-Input", vec.Label+"="+vec.SignatureInput)
			h.Set("Signature", vec.Label+"=:"+vec.Signature+":")
			d := must(httpsfv.UnmarshalDictionary([]string{h.Get("Signature-Input")}))
			member, _ := d.Get(vec.Label)
			list := member.(httpsfv.InnerList)
			var p Params
			if err := parseSignatureParams(list, m.response, &p); err != nil {
				t.Fatal(err)
			}
			gotBase := must(appendReceivedBase(nil, m, list, p.Components, false))
			if string(gotBase) != wantBase {
				t.Fatalf("verifier signature base:\n%s\nwant:\n%s", gotBase, wantBase)
			}
			v := &Verifier{
				Keys:                   keys.resolver(),
				InsecureSkipNonceCheck: true,
				Clock:                  func() time.Time { return created },
				Origin:                 httpsOrigin,
			}
			var ver *Verified
			var err error
			if resp != nil {
				ver, err = v.VerifyResponse(resp, nil)
			} else {
				ver, err = v.VerifyRequest(req)
			}
			if err != nil {
				t.Fatalf("published signature rejected: %v", err)
			}
			if ver.Label != vec.Label || ver.Params.KeyID != vec.KeyID || !ver.Params.Created.Equal(created) {
				t.Fatalf("Verified = %+v", ver)
			}

			// Signer side: same parameters, same Signature-Input and base.
			sk := keys.signing[vec.KeyID]
			h.Del("Signature-Input")
			h.Del("Signature")
			s := &Signer{Key: sk, Label: vec.Label}
			if resp != nil {
				err = s.SignResponse(resp, nil, p)
			} else {
				err = s.SignRequest(req, p)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := h.Get("Signature-Input"), vec.Label+"="+vec.SignatureInput; got != want {
				t.Fatalf("Signature-Input = %s\nwant %s", got, want)
			}
			sig := h.Get("Signature")
			if vec.Deterministic {
				if want := vec.Label + "=:" + vec.Signature + ":"; sig != want {
					t.Fatalf("Signature = %s\nwant %s", sig, want)
				}
			}
			raw := must(base64.StdEncoding.DecodeString(strings.TrimSuffix(strings.TrimPrefix(sig, vec.Label+"=:"), ":")))
			if err := keys.verifying[vec.KeyID].Verify([]byte(wantBase), raw); err != nil {
				t.Fatalf("fresh signature does not verify over the published base: %v", err)
			}
		})
	}
}

func httpsOrigin(r *http.Request) (string, string) { return "https", r.Host }

type digestVector struct {
	Source string `json:"source"`
	Body   string `json:"body"`
	Alg    string `json:"alg"`
	Value  string `json:"value"`
}

// TestRFC9530ContentDigest checks the Content-Digest values of RFC 9530 §2
// and of the RFC 9421 Appendix B.2 messages.
func TestRFC9530ContentDigest(t *testing.T) {
	var vecs []digestVector
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join("testdata", "rfc9530-content-digest.json"))), &vecs); err != nil {
		t.Fatal(err)
	}
	for _, v := range vecs {
		t.Run(v.Alg+" "+v.Body, func(t *testing.T) {
			got, err := ContentDigest(v.Alg, []byte(v.Body))
			if err != nil || got != v.Value {
				t.Fatalf("ContentDigest = %q, %v; want %q", got, err, v.Value)
			}
			if err := VerifyContentDigest(v.Value, []byte(v.Body)); err != nil {
				t.Fatal(err)
			}
			if err := VerifyContentDigest(v.Value, []byte(v.Body+" ")); !errors.Is(err, ErrSignatureInvalid) {
				t.Fatalf("altered body: %v", err)
			}
		})
	}
}
