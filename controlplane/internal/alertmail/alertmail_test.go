package alertmail_test

import (
	"strings"
	"testing"

	"github.com/idnhq/idn/controlplane/internal/alertmail"
)

func TestValidAddress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, addr string
		ok         bool
	}{
		{"bare address", "owner@acme.example", true},
		{"display name", "Owner <owner@acme.example>", false},
		{"header injection", "owner@acme.example\r\nBcc: all@example.com", false},
		{"two addresses", "a@example.com, b@example.com", false},
		{"no domain", "owner", false},
		{"too long", strings.Repeat("a", 250) + "@example.com", false},
		{"longest", strings.Repeat("a", 242) + "@example.com", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := alertmail.ValidAddress(tc.addr); got != tc.ok {
				t.Fatalf("ValidAddress(%q) = %v, want %v", tc.addr, got, tc.ok)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		c    alertmail.Config
		ok   bool
	}{
		{"off", alertmail.Config{}, true},
		{"sender alone", alertmail.Config{From: "idn@example.com"}, true},
		{"sender, copies and server", alertmail.Config{From: "idn@example.com", To: []string{"ops@example.com"}, SMTPAddr: "mail.example.com:587"}, true},
		{"copies without a sender", alertmail.Config{To: []string{"ops@example.com"}}, false},
		{"server without a sender", alertmail.Config{SMTPAddr: "mail.example.com:25"}, false},
		{"sender with a name", alertmail.Config{From: "idn <idn@example.com>"}, false},
		{"bad copy", alertmail.Config{From: "idn@example.com", To: []string{"ops"}}, false},
		{"server not host:port", alertmail.Config{From: "idn@example.com", SMTPAddr: "mail.example.com"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.c.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate = %v, want ok %v", err, tc.ok)
			}
			if tc.ok && tc.c.Enabled() != (tc.c.From != "") {
				t.Fatal("Enabled disagrees with From")
			}
		})
	}
}
