package httpsig_test

import (
	"strings"
	"testing"

	"github.com/idnhq/idn/httpsig"
)

// FuzzSignatureHeaders feeds arbitrary Signature-Input and Signature values
// to the verifier. It must never panic, every rejection must wrap a sentinel,
// and nothing but the genuine signature may verify.
func FuzzSignatureHeaders(f *testing.F) {
	r := newClientRequest(f)
	if err := (&httpsig.Signer{Key: httpsig.NewEd25519SigningKey(testEdPriv)}).SignRequest(r, defaultParams()); err != nil {
		f.Fatal(err)
	}
	genuineIn, genuineSig := r.Header.Get("Signature-Input"), r.Header.Get("Signature")
	genuineB64 := strings.TrimSuffix(strings.TrimPrefix(genuineSig, "sig1=:"), ":")
	f.Add(genuineIn, genuineSig)
	f.Add(`sig-b26=("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519"`,
		`sig-b26=:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==:`)
	f.Add(`sig1=();created=1799999990;nonce="x"`, `sig1=:AAAA:`)
	f.Add(`sig1=("@query-param";name="a" "x";key="k" "y";sf "z";bs;tr);created=1799999990;expires=1;alg="ed25519";tag="t";x=1.5;y=@12;z=%"d"`, `sig1=:AAAA:`)
	f.Add(`sig1=("@method";req);created=-1`, `sig1=:AAAA:;x`)
	f.Add(`a=1, b=?0, c`, `a=:AAAA:, b=:AAAA:`)
	f.Add(`sig1=("@path" "@path")`, `sig1="AAAA"`)
	f.Add(`sig1=(`, `sig1=:`)
	f.Add("", "")

	f.Fuzz(func(t *testing.T, in, sig string) {
		sr := received(t, newClientRequest(t))
		sr.Header.Set("Signature-Input", in)
		sr.Header.Set("Signature", sig)
		v := newVerifier(httpsig.NewEd25519VerifyingKey(testEdPub))
		v.InsecureSkipNonceCheck = true
		_, err := v.VerifyRequest(sr)
		if err == nil {
			if !strings.Contains(sig, genuineB64) {
				t.Fatalf("forged signature accepted: %q %q", in, sig)
			}
			return
		}
		if !wrapsSentinel(err) {
			t.Fatalf("error without a sentinel: %v", err)
		}
	})
}

// FuzzVerifyContentDigest checks that VerifyContentDigest never panics,
// that it accepts what ContentDigest produces, and that it accepts a header
// only when a known member matches the body.
func FuzzVerifyContentDigest(f *testing.F) {
	f.Add(`sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:`, []byte(`{"hello": "world"}`))
	f.Add(`sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:`, []byte(`{"hello": "world"}`))
	f.Add(`md5=:AAAA:, sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:`, []byte(""))
	f.Add(`sha-256="not bytes"`, []byte("x"))
	f.Add(`sha-256=(:AAAA:)`, []byte("x"))
	f.Add(`unknown=:AAAA:`, []byte("x"))
	f.Add(`sha-256=:AAAA:;q=1, sha-256=:BBBB:`, []byte("x"))
	f.Add(``, []byte(nil))
	f.Add(`,,,`, []byte("x"))

	f.Fuzz(func(t *testing.T, header string, body []byte) {
		err := httpsig.VerifyContentDigest(header, body)
		if err != nil && !wrapsSentinel(err) {
			t.Fatalf("error without a sentinel: %v", err)
		}
		if err == nil && httpsig.VerifyContentDigest(header, append(body, 'x')) == nil {
			t.Fatalf("%q accepted for two different bodies", header)
		}
		for _, alg := range []string{httpsig.DigestSHA256, httpsig.DigestSHA512} {
			good, err := httpsig.ContentDigest(alg, body)
			if err != nil {
				t.Fatal(err)
			}
			if err := httpsig.VerifyContentDigest(good, body); err != nil {
				t.Fatalf("own digest rejected: %v", err)
			}
		}
	})
}
