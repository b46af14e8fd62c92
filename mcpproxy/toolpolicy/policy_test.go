package toolpolicy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/idnhq/idn/mcpproxy/toolpolicy"
)

func TestPolicyExplain(t *testing.T) {
	t.Parallel()
	discovered := []string{"a.one", "a.two", "b.x", "b.y", "c.z"}
	tests := []struct {
		name    string
		policy  toolpolicy.Policy
		subject string
		tool    string
		allowed bool
		source  toolpolicy.Source
	}{
		{"no lists allows", toolpolicy.Policy{}, "s", "b.x", true, toolpolicy.SourceDefaultAllow},
		{"connection deny", toolpolicy.Policy{Deny: []string{"b.*"}}, "s", "b.x", false, toolpolicy.SourceConnectionDenylist},
		{"connection deny wins over allow", toolpolicy.Policy{Allow: []string{"b.x"}, Deny: []string{"b.?"}}, "s", "b.x", false, toolpolicy.SourceConnectionDenylist},
		{"connection allow match", toolpolicy.Policy{Allow: []string{"a.*"}}, "s", "a.one", true, toolpolicy.SourceConnectionAllowlist},
		{"connection allow miss", toolpolicy.Policy{Allow: []string{"a.*"}}, "s", "b.x", false, toolpolicy.SourceConnectionAllowlist},
		{"subject deny", toolpolicy.Policy{Subjects: map[string]toolpolicy.SubjectPolicy{"s": {Deny: []string{"a.t*"}}}}, "s", "a.two", false, toolpolicy.SourceSubjectDenylist},
		{"subject allow match", toolpolicy.Policy{Subjects: map[string]toolpolicy.SubjectPolicy{"s": {Allow: []string{"c.*"}}}}, "s", "c.z", true, toolpolicy.SourceSubjectAllowlist},
		{"subject allow miss", toolpolicy.Policy{Subjects: map[string]toolpolicy.SubjectPolicy{"s": {Allow: []string{"c.*"}}}}, "s", "a.one", false, toolpolicy.SourceSubjectAllowlist},
		{"other subject unaffected", toolpolicy.Policy{Subjects: map[string]toolpolicy.SubjectPolicy{"s": {Deny: []string{"*"}}}}, "t", "a.one", true, toolpolicy.SourceDefaultAllow},
		{"subject deny wins over subject allow", toolpolicy.Policy{Subjects: map[string]toolpolicy.SubjectPolicy{"s": {Allow: []string{"a.*"}, Deny: []string{"a.one"}}}}, "s", "a.one", false, toolpolicy.SourceSubjectDenylist},
		{"escalation: subject allow cannot widen connection allow", toolpolicy.Policy{Allow: []string{"a.*"}, Subjects: map[string]toolpolicy.SubjectPolicy{"s": {Allow: []string{"b.x"}}}}, "s", "b.x", false, toolpolicy.SourceConnectionAllowlist},
		{"escalation: subject allow cannot undo connection deny", toolpolicy.Policy{Deny: []string{"b.x"}, Subjects: map[string]toolpolicy.SubjectPolicy{"s": {Allow: []string{"*"}}}}, "s", "b.x", false, toolpolicy.SourceConnectionDenylist},
		{"escalation: subject allow cannot pass the cap", toolpolicy.Policy{MaxTools: 2, Subjects: map[string]toolpolicy.SubjectPolicy{"s": {Allow: []string{"c.z"}}}}, "s", "c.z", false, toolpolicy.SourceToolCap},
		{"cap keeps first by name", toolpolicy.Policy{MaxTools: 2}, "s", "a.two", true, toolpolicy.SourceDefaultAllow},
		{"cap hides the rest", toolpolicy.Policy{MaxTools: 2}, "s", "b.x", false, toolpolicy.SourceToolCap},
		{"cap counts only connection-allowed tools", toolpolicy.Policy{MaxTools: 2, Deny: []string{"a.*"}}, "s", "b.y", true, toolpolicy.SourceDefaultAllow},
		{"cap is the same for every subject", toolpolicy.Policy{MaxTools: 2, Subjects: map[string]toolpolicy.SubjectPolicy{"s": {Deny: []string{"a.one"}}}}, "s", "b.x", false, toolpolicy.SourceToolCap},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.policy.Explain(tt.subject, tt.tool, discovered)
			if got.Allowed != tt.allowed || got.Source != tt.source || got.Tool != tt.tool {
				t.Errorf("Explain = %+v, want allowed=%v source=%s", got, tt.allowed, tt.source)
			}
			// Filter must agree with Explain for every tool.
			listed := slices.Contains(tt.policy.Filter(tt.subject, discovered), tt.tool)
			if listed != tt.allowed {
				t.Errorf("Filter lists %s = %v, Explain says %v", tt.tool, listed, tt.allowed)
			}
		})
	}
}

func BenchmarkPolicyFilter(b *testing.B) {
	var names []string
	for i := range 200 {
		names = append(names, "vendor"+string(rune('a'+i%26))+".action"+strings.Repeat("x", i%7))
	}
	slices.Sort(names) // as discovery stores them
	p := toolpolicy.Policy{
		Allow:    []string{"vendor?.*", "other.*"},
		Deny:     []string{"vendorz.*"},
		Subjects: map[string]toolpolicy.SubjectPolicy{"agent": {Deny: []string{"*xxxxxx"}}},
		MaxTools: 150,
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Filter("agent", names)
	}
}
