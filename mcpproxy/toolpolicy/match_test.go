package toolpolicy

import (
	"regexp"
	"strings"
	"testing"
)

func TestMatchWildcard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, pattern, tool string
		want                bool
	}{
		{"exact", "github.list", "github.list", true},
		{"exact mismatch", "github.list", "github.lists", false},
		{"star suffix", "github.*", "github.repos.list", true},
		{"star does not match other prefix", "github.*", "gitlab.list", false},
		{"star matches empty", "github.*", "github.", true},
		{"lone star", "*", "anything.at.all", true},
		{"star matches empty name", "*", "", true},
		{"question one rune", "a.?", "a.x", true},
		{"question not zero runes", "a.?", "a.", false},
		{"question not two runes", "a.?", "a.xy", false},
		{"question multibyte rune", "a.?", "a.é", true},
		{"inner star", "a*z", "abcz", true},
		{"inner star backtracks", "a*b*c", "aXbYbZc", true},
		{"empty pattern", "", "a", false},
		{"prefix injection is literal", "a.[b]", "a.b", false},
		{"regex metachar literal", "a.b", "aXb", false},
		{"pathological backtracking", "*a*a*a*a*a*a*a*a*b", strings.Repeat("a", 200), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := matchWildcard(tt.pattern, tt.tool); got != tt.want {
				t.Errorf("matchWildcard(%q, %q) = %v, want %v", tt.pattern, tt.tool, got, tt.want)
			}
		})
	}
}

// wildcardRegexp is the reference semantics the fuzz target checks against.
func wildcardRegexp(pattern string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`^(?s:`)
	for _, r := range pattern {
		switch r {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`)$`)
	return regexp.MustCompile(b.String())
}

func FuzzMatchWildcard(f *testing.F) {
	for _, seed := range [][2]string{
		{"github.*", "github.repos.list"},
		{"a.?", "a.x"},
		{"*a*b", "aaab"},
		{"?*?", "ab"},
		{"", ""},
		{"é?", "éé"},
		{"*", "\xff"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if !utf8Valid(pattern) || !utf8Valid(name) {
			return // tool names and patterns arrive as JSON strings: valid UTF-8
		}
		got := matchWildcard(pattern, name)
		want := wildcardRegexp(pattern).MatchString(name)
		if got != want {
			t.Fatalf("matchWildcard(%q, %q) = %v, regexp says %v", pattern, name, got, want)
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func BenchmarkMatchWildcard(b *testing.B) {
	for b.Loop() {
		_ = matchWildcard("github.*.list?", "github.repos.issues.lists")
	}
}
