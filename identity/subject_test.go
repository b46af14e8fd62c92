package identity

import (
	"errors"
	"net/http"
	"testing"
	"unicode/utf8"

	"github.com/idnhq/idn/httpsig"
)

func TestSubjectEncoding(t *testing.T) {
	for _, c := range []struct{ subject, header string }{
		{"user-42", "user-42"},
		{`100% "done"`, `100% "done"`}, // printable ASCII travels as itself
		{"Zoë", `%"Zo%c3%ab"`},
		{"山田 🤖", `%"%e5%b1%b1%e7%94%b0 %f0%9f%a4%96"`},
		{`%"x"`, `%"%25%22x%22"`}, // would read as a display string
		{`%`, `%`},
	} {
		if got := EncodeSubject(c.subject); got != c.header {
			t.Errorf("EncodeSubject(%q) = %q, want %q", c.subject, got, c.header)
		}
		if got, err := DecodeSubject(c.header); err != nil || got != c.subject {
			t.Errorf("DecodeSubject(%q) = %q, %v, want %q", c.header, got, err, c.subject)
		}
	}
}

func TestDecodeSubjectRefuses(t *testing.T) {
	for name, header := range map[string]string{
		"upper-case hex":           `%"Zo%C3%AB"`,
		"latin-1 byte":             `%"Zo%eb"`,
		"unterminated":             `%"Zo`,
		"prefix only":              `%"`,
		"bare quote inside":        `%"a"b"`,
		"truncated escape":         `%"a%e"`,
		"raw non-ASCII inside":     "%\"Zo\xc3\xab\"",
		"control inside":           "%\"a\tb\"",
		"escape of a single digit": `%"%2"`,
	} {
		if got, err := DecodeSubject(header); err == nil {
			t.Errorf("%s: DecodeSubject(%q) = %q, want an error", name, header, got)
		}
	}
}

// The verifier applies the subject rules to the decoded subject: an
// invisible character hidden in escapes is refused as one sent raw is.
func TestVerifyDecodesSubject(t *testing.T) {
	v := loadVectors(t)
	id := vectorIdentity(t, v)
	for name, c := range map[string]struct {
		header string
		want   string
		err    error
	}{
		"display string":           {header: `%"Zo%c3%ab M%c3%bcller"`, want: "Zoë Müller"},
		"raw UTF-8 of old Go CLIs": {header: "Zoë Müller", want: "Zoë Müller"},
		"hidden right-to-left":     {header: `%"%e2%80%aeevil"`, err: httpsig.ErrIdentityInvalid},
		"latin-1 as fetch sent it": {header: "Zo\xeb", err: httpsig.ErrIdentityInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			// Signed with the header as it arrives.
			r, _ := http.NewRequest("GET", "http://gw.example/proxy/x", nil)
			p, err := id.prepareRequest(r, SignOptions{}, false)
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set(HeaderSubject, c.header)
			if err := id.signer().SignRequest(r, p); err != nil {
				t.Fatal(err)
			}
			r = serverRequest(t, r)
			caller, err := (&Verifier{Nonces: nonces(nil)}).Verify(r)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("Verify = %v, want %v", err, c.err)
				}
				return
			}
			if err != nil || caller.Subject != c.want {
				t.Fatalf("Verify = %+v, %v, want subject %q", caller, err, c.want)
			}
		})
	}
}

// Sign trims the subject as HTTP trims the header, so the subject a
// verifier reads is the one signed, and encodes what is not ASCII.
func TestSignSubjectAsSent(t *testing.T) {
	v := loadVectors(t)
	id := vectorIdentity(t, v)
	r := signed(t, id, "GET", "http://gw.example/proxy/x", "", SignOptions{Subject: "  Zoë\t"})
	if got := r.Header.Get(HeaderSubject); got != `%"Zo%c3%ab"` {
		t.Fatalf("idn-subject = %q", got)
	}
	caller, err := (&Verifier{Nonces: nonces(nil)}).Verify(r)
	if err != nil || caller.Subject != "Zoë" {
		t.Fatalf("Verify = %+v, %v", caller, err)
	}
}

func FuzzDecodeSubject(f *testing.F) {
	for _, s := range []string{"user", `%"Zo%c3%ab"`, `%"%25%22"`, `%"`, `%"%ff"`, "Zoë"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		subject, err := DecodeSubject(header)
		if err != nil {
			return
		}
		if !utf8.ValidString(subject) {
			if len(header) >= 2 && header[:2] == `%"` {
				t.Fatalf("DecodeSubject(%q) = %q, not UTF-8", header, subject)
			}
			return // a raw value; the subject rules refuse it
		}
		// What decodes re-encodes to a header that decodes the same.
		again, err := DecodeSubject(EncodeSubject(subject))
		if err != nil || again != subject {
			t.Fatalf("round trip of %q: %q, %v", subject, again, err)
		}
	})
}
