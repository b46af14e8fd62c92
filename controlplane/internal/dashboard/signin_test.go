package dashboard

import (
	"net/url"
	"strings"
	"testing"
)

// TestSafeNext: a login or sign-in link continues only to a path of this
// dashboard's origin.
func TestSafeNext(t *testing.T) {
	t.Parallel()
	for next, want := range map[string]string{
		"/services":                   "/services",
		"/claims?status=approved&a=b": "/claims?status=approved&a=b",
		"//evil.example":              "/claims",
		"https://evil.example":        "/claims",
		"/\\evil.example":             "/claims",
		"\\\\evil.example":            "/claims",
		"/\t/evil.example":            "/claims",
		"/\n/evil.example":            "/claims",
		"/\r/evil.example":            "/claims",
		"/x\t/y":                      "/claims",
		" //evil.example":             "/claims",
		"\x01//evil.example":          "/claims",
		"/\u3000/evil.example":        "/claims",
		"/\xff":                       "/claims",
		// Encoded, the tab stays in the path: same origin.
		"/%09/evil.example": "/%09/evil.example",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

// FuzzSafeNext: whatever a login or sign-in link asks to continue to, the
// dashboard only ever goes to a path of its own origin.
func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/claims?status=approved", "//evil.example", "/\\evil.example", "https://evil.example/",
		"/%2F%2Fevil.example", "/\t/evil.example", "/%", "", "javascript:alert(1)", "/services/svc_1#x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, next string) {
		got := safeNext(next)
		if got != next && got != "/claims" {
			t.Fatalf("safeNext(%q) = %q: neither the input nor the default", next, got)
		}
		if !strings.HasPrefix(got, "/") || strings.HasPrefix(got, "//") {
			t.Fatalf("safeNext(%q) = %q is not a path of this origin", next, got)
		}
		if u, err := url.Parse(got); err == nil && (u.Scheme != "" || u.Host != "") {
			t.Fatalf("safeNext(%q) = %q names another origin (%+v)", next, got, u)
		}
		// Browsers read a backslash as a slash and drop tabs and newlines.
		if cleaned := strings.NewReplacer("\\", "/", "\t", "", "\n", "", "\r", "").Replace(got); strings.HasPrefix(cleaned, "//") {
			t.Fatalf("safeNext(%q) = %q, which a browser reads as %q", next, got, cleaned)
		}
	})
}
