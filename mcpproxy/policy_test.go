package mcpproxy

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

func TestPolicyExplain(t *testing.T) {
	t.Parallel()
	discovered := []string{"a.one", "a.two", "b.x", "b.y", "c.z"}
	tests := []struct {
		name    string
		policy  Policy
		subject string
		tool    string
		allowed bool
		source  Source
	}{
		{"no lists allows", Policy{}, "s", "b.x", true, SourceDefaultAllow},
		{"connection deny", Policy{Deny: []string{"b.*"}}, "s", "b.x", false, SourceConnectionDenylist},
		{"connection deny wins over allow", Policy{Allow: []string{"b.x"}, Deny: []string{"b.?"}}, "s", "b.x", false, SourceConnectionDenylist},
		{"connection allow match", Policy{Allow: []string{"a.*"}}, "s", "a.one", true, SourceConnectionAllowlist},
		{"connection allow miss", Policy{Allow: []string{"a.*"}}, "s", "b.x", false, SourceConnectionAllowlist},
		{"subject deny", Policy{Subjects: map[string]SubjectPolicy{"s": {Deny: []string{"a.t*"}}}}, "s", "a.two", false, SourceSubjectDenylist},
		{"subject allow match", Policy{Subjects: map[string]SubjectPolicy{"s": {Allow: []string{"c.*"}}}}, "s", "c.z", true, SourceSubjectAllowlist},
		{"subject allow miss", Policy{Subjects: map[string]SubjectPolicy{"s": {Allow: []string{"c.*"}}}}, "s", "a.one", false, SourceSubjectAllowlist},
		{"other subject unaffected", Policy{Subjects: map[string]SubjectPolicy{"s": {Deny: []string{"*"}}}}, "t", "a.one", true, SourceDefaultAllow},
		{"subject deny wins over subject allow", Policy{Subjects: map[string]SubjectPolicy{"s": {Allow: []string{"a.*"}, Deny: []string{"a.one"}}}}, "s", "a.one", false, SourceSubjectDenylist},
		{"escalation: subject allow cannot widen connection allow", Policy{Allow: []string{"a.*"}, Subjects: map[string]SubjectPolicy{"s": {Allow: []string{"b.x"}}}}, "s", "b.x", false, SourceConnectionAllowlist},
		{"escalation: subject allow cannot undo connection deny", Policy{Deny: []string{"b.x"}, Subjects: map[string]SubjectPolicy{"s": {Allow: []string{"*"}}}}, "s", "b.x", false, SourceConnectionDenylist},
		{"escalation: subject allow cannot pass the cap", Policy{MaxTools: 2, Subjects: map[string]SubjectPolicy{"s": {Allow: []string{"c.z"}}}}, "s", "c.z", false, SourceToolCap},
		{"cap keeps first by name", Policy{MaxTools: 2}, "s", "a.two", true, SourceDefaultAllow},
		{"cap hides the rest", Policy{MaxTools: 2}, "s", "b.x", false, SourceToolCap},
		{"cap counts only connection-allowed tools", Policy{MaxTools: 2, Deny: []string{"a.*"}}, "s", "b.y", true, SourceDefaultAllow},
		{"cap is the same for every subject", Policy{MaxTools: 2, Subjects: map[string]SubjectPolicy{"s": {Deny: []string{"a.one"}}}}, "s", "b.x", false, SourceToolCap},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.policy.Explain(tt.subject, tt.tool, discovered)
			if got.Allowed != tt.allowed || got.Source != tt.source || got.Tool != tt.tool {
				t.Errorf("Explain = %+v, want allowed=%v source=%s", got, tt.allowed, tt.source)
			}
			// Filter must agree with Explain for every tool.
			var tools []Tool
			for _, n := range discovered {
				tools = append(tools, Tool{Name: n})
			}
			listed := false
			for _, tl := range tt.policy.Filter(tt.subject, tools) {
				listed = listed || tl.Name == tt.tool
			}
			if listed != tt.allowed {
				t.Errorf("Filter lists %s = %v, Explain says %v", tt.tool, listed, tt.allowed)
			}
		})
	}
}

func BenchmarkPolicyFilter(b *testing.B) {
	var tools []Tool
	for i := range 200 {
		tools = append(tools, Tool{Name: "vendor" + string(rune('a'+i%26)) + ".action" + strings.Repeat("x", i%7)})
	}
	tools = newSnapshot(Discovery{Tools: tools}).d.Tools // sorted, as discovery stores them
	p := Policy{
		Allow:    []string{"vendor?.*", "other.*"},
		Deny:     []string{"vendorz.*"},
		Subjects: map[string]SubjectPolicy{"agent": {Deny: []string{"*xxxxxx"}}},
		MaxTools: 150,
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Filter("agent", tools)
	}
}

func BenchmarkMatchWildcard(b *testing.B) {
	for b.Loop() {
		_ = matchWildcard("github.*.list?", "github.repos.issues.lists")
	}
}
