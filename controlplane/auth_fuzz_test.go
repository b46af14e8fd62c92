package controlplane

import (
	"encoding/json"
	"testing"
)

// FuzzParseCredential feeds arbitrary bytes to the decoding of the
// untrusted credential member of every ceremony: it must answer an error
// or a parsed credential, never panic, and report failures as
// CREDENTIAL_INVALID. The seeds are real ES256 and EdDSA responses.
func FuzzParseCredential(f *testing.F) {
	options := []byte(`{"challenge":"c2VlZC1jaGFsbGVuZ2Utb2YtMzItYnl0ZXMtbG9uZyEh","rp":{"id":"localhost","name":"idn"},` +
		`"user":{"id":"dXNyXzE","name":"alice","displayName":"alice"},"rpId":"localhost"}`)
	for _, alg := range []string{"ES256", "EdDSA"} {
		d := newDevice(f, alg)
		f.Add([]byte(d.create(f, options)))
		f.Add([]byte(d.get(f, options)))
	}
	f.Add([]byte(`{"id":"","rawId":"","type":"public-key","response":{}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"response":{"clientDataJSON":"e30","attestationObject":"oA"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // the request body decoder refuses it before
		}
		if p, e := parseCreation(raw); (p == nil) == (e == nil) || e != nil && e.Code != "CREDENTIAL_INVALID" {
			t.Fatalf("parseCreation(%q) = %v, %v", raw, p, e)
		}
		if p, e := parseAssertion(raw); (p == nil) == (e == nil) || e != nil && e.Code != "CREDENTIAL_INVALID" {
			t.Fatalf("parseAssertion(%q) = %v, %v", raw, p, e)
		}
	})
}
