package display

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckAndShown(t *testing.T) {
	for _, tt := range []struct {
		name, in, shown string
	}{
		{"plain ASCII", "deploy-bot 2", "deploy-bot 2"},
		{"letters of other scripts", "Zürich ботик 東京", "Zürich ботик 東京"},
		{"emoji with a variation selector", "bot \u2764\uFE0F", "bot \u2764\uFE0F"},
		{"combining mark", "Cafe\u0301", "Cafe\u0301"},
		{"right-to-left override hides an extension", "invoice\u202Egpj.exe", `invoice\u202Egpj.exe`},
		{"bidi isolate", "a\u2067b\u2069", `a\u2067b\u2069`},
		{"left-to-right mark", "a\u200Eb", `a\u200Eb`},
		{"zero-width space splits a look-alike", "acme\u200Bcorp", `acme\u200Bcorp`},
		{"zero-width joiner", "a\u200Db", `a\u200Db`},
		{"byte order mark", "\uFEFFacme", `\uFEFFacme`},
		{"soft hyphen", "ac\u00ADme", `ac\u00ADme`},
		{"word joiner", "a\u2060b", `a\u2060b`},
		{"tag characters smuggle text", "ok\U000E0041\U000E0042", `ok\U000E0041\U000E0042`},
		{"tab", "a\tb", `a\u0009b`},
		{"newline", "a\nApproved", `a\u000AApproved`},
		{"C1 control", "a\u0085b", `a\u0085b`},
		{"delete", "a\x7fb", `a\u007Fb`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"paragraph separator", "a\u2029b", `a\u2029b`},
		{"no-break space passes for a space", "acme\u00A0bot", `acme\u00A0bot`},
		{"ideographic space", "a\u3000b", `a\u3000b`},
		{"Hangul filler renders as nothing", "\u3164", `\u3164`},
		{"combining grapheme joiner", "a\u034Fb", `a\u034Fb`},
		{"private use", "a\uE000b", `a\uE000b`},
		{"noncharacter", "a\uFFFEb", `a\uFFFEb`},
		{"invalid UTF-8", "a\xffb", `a\xFFb`},
		{"a replacement character is a character", "a\uFFFDb", "a\uFFFDb"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.in)
			if (err == nil) != (tt.in == tt.shown) {
				t.Errorf("Check(%q) = %v", tt.in, err)
			}
			if got := Shown(tt.in); got != tt.shown {
				t.Errorf("Shown(%q) = %q, want %q", tt.in, got, tt.shown)
			}
		})
	}
}

func TestCheckNamesTheOffender(t *testing.T) {
	if err := Check("a\u202Eb"); err == nil || !strings.Contains(err.Error(), `\u202E`) {
		t.Errorf("Check = %v", err)
	}
	if err := Check("a\xc3"); err == nil || !strings.Contains(err.Error(), `\xC3`) {
		t.Errorf("Check = %v", err)
	}
}

// FuzzShown: whatever is stored, what the dashboard shows passes the check
// (no hidden rune survives), and a valid string is shown as it is.
func FuzzShown(f *testing.F) {
	for _, s := range []string{"", "acme", "a\u202Eb", "\xff\xfe", "\U000E0041", "a\u00A0b", "x\u2764\uFE0F", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		shown := Shown(s)
		if err := Check(shown); err != nil {
			t.Fatalf("Shown(%q) = %q, which Check refuses: %v", s, shown, err)
		}
		if (Check(s) == nil) != (shown == s) {
			t.Fatalf("Check(%q) = %v but Shown = %q", s, Check(s), shown)
		}
		if !utf8.ValidString(shown) {
			t.Fatalf("Shown(%q) = %q is not UTF-8", s, shown)
		}
	})
}
