package ownerauth

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/descope/virtualwebauthn"
)

// FuzzParseCredential feeds arbitrary bytes to the decoding of the
// untrusted credential member of every ceremony: it must answer an error
// or a parsed credential, never panic, and report failures as
// CREDENTIAL_INVALID. The seeds are real ES256 and EdDSA responses.
func FuzzParseCredential(f *testing.F) {
	options := []byte(`{"challenge":"c2VlZC1jaGFsbGVuZ2Utb2YtMzItYnl0ZXMtbG9uZyEh","rp":{"id":"localhost","name":"idn"},` +
		`"user":{"id":"dXNyXzE","name":"alice","displayName":"alice"},"rpId":"localhost"}`)
	// Real responses of a virtual authenticator, one of each ceremony.
	rp := virtualwebauthn.RelyingParty{ID: "localhost", Name: "idn", Origin: "http://localhost:8787"}
	auth, cred := virtualwebauthn.NewAuthenticator(), virtualwebauthn.NewCredential(virtualwebauthn.KeyTypeEC2)
	creation, err := virtualwebauthn.ParseAttestationOptions(string(options))
	if err != nil {
		f.Fatal(err)
	}
	assertion, err := virtualwebauthn.ParseAssertionOptions(string(options))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(virtualwebauthn.CreateAttestationResponse(rp, auth, cred, *creation)))
	f.Add([]byte(virtualwebauthn.CreateAssertionResponse(rp, auth, cred, *assertion)))
	f.Add([]byte(`{"id":"","rawId":"","type":"public-key","response":{}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"response":{"clientDataJSON":"e30","attestationObject":"oA"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // the request body decoder refuses it before
		}
		if p, e := parseCreation(raw); (p == nil) == (e == nil) || e != nil && e.Code().String() != "CREDENTIAL_INVALID" {
			t.Fatalf("parseCreation(%q) = %v, %v", raw, p, e)
		}
		if p, e := parseAssertion(raw); (p == nil) == (e == nil) || e != nil && e.Code().String() != "CREDENTIAL_INVALID" {
			t.Fatalf("parseAssertion(%q) = %v, %v", raw, p, e)
		}
	})
}

// FuzzCleanUserAgent: whatever a client sends as User-Agent, the owner's
// session list shows at most maxUserAgent bytes of valid, printable UTF-8.
func FuzzCleanUserAgent(f *testing.F) {
	f.Add("Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0")
	f.Add("curl/8\r\nX-Evil: 1")
	f.Add("\xff\xfe\x00\u202e" + strings.Repeat("é", 150))
	f.Fuzz(func(t *testing.T, ua string) {
		got := cleanUserAgent(ua)
		if len(got) > maxUserAgent || !utf8.ValidString(got) || strings.ContainsFunc(got, func(r rune) bool { return !unicode.IsPrint(r) }) {
			t.Fatalf("cleanUserAgent(%q) = %q", ua, got)
		}
	})
}
