package textcap

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	long := strings.Repeat("a", 100_000)
	tests := []struct {
		name, in string
		max      int
		want     string
	}{
		{"short name kept", "get_weather", Name, "get_weather"},
		{"empty", "", Name, ""},
		{"exactly the bound", long[:Name], Name, long[:Name]},
		{"100 KB tool name", long, Name, long[:Name]},
		{"cut before a character that does not fit", "ab" + "é", 3, "ab"},
		{"newline cannot forge a log line", "x\n{\"outcome\":\"allow\"}", 8, "x\uFFFD{\"ou"},
		{"invalid UTF-8 replaced", "a\xffb", Name, "a\uFFFDb"},
		{"DEL replaced", "a\x7f", Name, "a\uFFFD"},
		{"replacement counts its three bytes", "\x00\x00", 4, "\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Clip(tt.in, tt.max); got != tt.want {
				t.Errorf("Clip(%.20q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
		})
	}
}

// FuzzClip: whatever the input, the result fits, is valid UTF-8 without
// control characters, and is the input itself when the input was so.
func FuzzClip(f *testing.F) {
	for _, s := range []string{"", "tool", "a\nb", "\xff\xfe", "é" + strings.Repeat("x", 200)} {
		f.Add(s, 8)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		max = max & 0x3ff
		got := Clip(s, max)
		if len(got) > max || !utf8.ValidString(got) || strings.ContainsFunc(got, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("Clip(%q, %d) = %q", s, max, got)
		}
		if plain(s, max) && got != s {
			t.Fatalf("Clip(%q, %d) changed a plain value to %q", s, max, got)
		}
	})
}

func BenchmarkClipPlain(b *testing.B) {
	for b.Loop() {
		Clip("get_weather_forecast", Name)
	}
}
