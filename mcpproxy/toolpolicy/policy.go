// Package toolpolicy decides which of an MCP server's tools a caller may see
// and call: a connection's allow and deny lists and tool cap, narrowed per
// idn-subject, with '*' and '?' wildcards. Policy.Explain gives the
// decision for one tool and the rule that made it, Policy.Filter the tools
// a subject sees. It is pure logic: the gateway applies it to discovered
// tool names before any upstream call.
package toolpolicy

import "slices"

// Source names the rule that decided whether a tool is exposed, as reported
// by the explain route.
type Source string

// The decision sources. SourceToolCap explains a tool hidden by
// mcp_max_tools; the other five name the list that decided.
const (
	SourceConnectionAllowlist Source = "connection_allowlist"
	SourceConnectionDenylist  Source = "connection_denylist"
	SourceSubjectAllowlist    Source = "subject_allowlist"
	SourceSubjectDenylist     Source = "subject_denylist"
	SourceDefaultAllow        Source = "default_allow"
	SourceToolCap             Source = "connection_tool_cap"
)

// SubjectPolicy narrows a connection's tools for one idn-subject. It is one
// value of the connection's mcp_subject_tool_policies object.
type SubjectPolicy struct {
	// Allow, when non-empty, exposes only matching tools (within what the
	// connection already exposes). Empty means no subject allow list.
	Allow []string `json:"allow,omitempty"`
	// Deny hides matching tools. Empty hides nothing.
	Deny []string `json:"deny,omitempty"`
}

// Policy is a connection's tool policy. Every list takes patterns where '*'
// matches any run of characters and '?' exactly one. The zero Policy exposes
// every discovered tool (source default_allow): a connection with no lists
// restricts nothing.
type Policy struct {
	// Allow is mcp_tool_allowlist: when non-empty, only matching tools are
	// exposed. Empty means no connection allow list.
	Allow []string
	// Deny is mcp_tool_denylist; it wins over Allow.
	Deny []string
	// Subjects is mcp_subject_tool_policies, keyed by idn-subject. A subject
	// without an entry sees what the connection exposes. Subject policies
	// only ever narrow the connection policy.
	Subjects map[string]SubjectPolicy
	// MaxTools is mcp_max_tools: at most this many of the tools the
	// connection lists allow, taken in name order, are exposed; the rest are
	// hidden with source connection_tool_cap. Zero or negative means no cap.
	MaxTools int
}

// Decision is the outcome of the policy for one tool and subject.
type Decision struct {
	Tool    string `json:"tool"`
	Allowed bool   `json:"allowed"`
	Source  Source `json:"source"`
}

// connectionDecision applies the connection lists only.
func (p *Policy) connectionDecision(tool string) (allowed bool, src Source) {
	if matchAny(p.Deny, tool) {
		return false, SourceConnectionDenylist
	}
	if len(p.Allow) > 0 {
		if !matchAny(p.Allow, tool) {
			return false, SourceConnectionAllowlist
		}
		return true, SourceConnectionAllowlist
	}
	return true, SourceDefaultAllow
}

// subjectDecision applies the subject lists to a tool the connection exposes;
// connSrc is the source the connection stage decided with.
func (p *Policy) subjectDecision(subject, tool string, connSrc Source) (bool, Source) {
	sp, ok := p.Subjects[subject]
	if !ok {
		return true, connSrc
	}
	if matchAny(sp.Deny, tool) {
		return false, SourceSubjectDenylist
	}
	if len(sp.Allow) > 0 {
		// Whether it matched or not, the subject allow list decided.
		return matchAny(sp.Allow, tool), SourceSubjectAllowlist
	}
	return true, connSrc
}

// Explain decides whether subject may see and call tool, given the names of
// all discovered tools (needed for the MaxTools cap). The order is
// connection deny, connection allow, the cap, subject deny, subject allow,
// else default allow, so a subject's lists can only narrow what the
// connection exposes. The cap is a connection rule, so it is applied
// before the subject's lists and counts the same tools for every subject.
func (p *Policy) Explain(subject, tool string, discovered []string) Decision {
	allowed, src := p.connectionDecision(tool)
	if !allowed {
		return Decision{Tool: tool, Allowed: false, Source: src}
	}
	if p.MaxTools > 0 {
		rank := 0
		for _, name := range discovered {
			if name < tool {
				if ok, _ := p.connectionDecision(name); ok {
					rank++
				}
			}
		}
		if rank >= p.MaxTools {
			return Decision{Tool: tool, Allowed: false, Source: SourceToolCap}
		}
	}
	allowed, src = p.subjectDecision(subject, tool, src)
	return Decision{Tool: tool, Allowed: allowed, Source: src}
}

// Filter returns the names of the tools subject may see, sorted, out of
// the names of all discovered tools. The input is not modified.
func (p *Policy) Filter(subject string, names []string) []string {
	sorted := names
	if !slices.IsSorted(names) { // discovery results already are
		sorted = slices.Clone(names)
		slices.Sort(sorted)
	}
	out := make([]string, 0, len(sorted))
	exposed := 0
	for _, name := range sorted {
		ok, src := p.connectionDecision(name)
		if !ok {
			continue
		}
		if p.MaxTools > 0 && exposed >= p.MaxTools {
			break
		}
		exposed++
		if ok, _ = p.subjectDecision(subject, name, src); ok {
			out = append(out, name)
		}
	}
	return out
}
