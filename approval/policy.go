package approval

import (
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/idnhq/idn/identity/display"
	"github.com/idnhq/idn/mcpproxy/toolpolicy"
)

// MaxSubjects bounds the subjects of approval_subjects.
const MaxSubjects = 1000

// maxSubjectSize is the longest idn-subject a caller may sign.
const maxSubjectSize = 256

// Policy is a connection's approval rules: Connection's hold every
// caller's calls, and each subject's (approval_subjects, given to
// NewPolicy) hold more calls made for that idn-subject. A subject's rules add to the connection's and
// never release a call those hold. The zero Policy holds nothing.
//
// A subject is matched once trimmed of spaces and case folded, so a
// caller signing "Alice" or " alice" is held as "alice" is: a hold is
// safer wider. A call with no subject (the unsigned development bypass)
// is held by every subject's rules.
type Policy struct {
	Connection Rules
	subjects   map[string]Rules // by folded subject
}

// NewPolicy returns the policy of a connection's rules and its
// subjects' (approval_subjects, keyed by idn-subject). Subjects whose
// keys fold to the same subject have their rules joined.
func NewPolicy(connection Rules, subjects map[string]Rules) *Policy {
	p := &Policy{Connection: connection}
	if len(subjects) == 0 {
		return p
	}
	p.subjects = make(map[string]Rules, len(subjects))
	for s, r := range subjects {
		k := foldSubject(s)
		prev := p.subjects[k]
		p.subjects[k] = Rules{Tools: append(prev.Tools, r.Tools...), Routes: append(prev.Routes, r.Routes...)}
	}
	return p
}

// Empty reports whether p holds no call.
func (p *Policy) Empty() bool { return p.Connection.Empty() && len(p.subjects) == 0 }

// HoldsTool reports whether a call of the MCP tool name made for subject
// needs an approval.
func (p *Policy) HoldsTool(subject, name string) bool {
	if p.Connection.MatchTool(name) {
		return true
	}
	if len(p.subjects) == 0 {
		return false
	}
	if subject == "" {
		for _, r := range p.subjects {
			if r.MatchTool(name) {
				return true
			}
		}
		return false
	}
	r, ok := p.lookup(subject)
	return ok && r.MatchTool(name)
}

// HoldsRoute reports whether an HTTP call made for subject needs an
// approval; method and escapedPath are as Rules.MatchRoute takes them.
func (p *Policy) HoldsRoute(subject, method, escapedPath string) bool {
	if len(p.Connection.Routes) == 0 && len(p.subjects) == 0 {
		return false
	}
	path, err := url.PathUnescape(escapedPath)
	if err != nil {
		return true // unreadable: ask the owner rather than guess
	}
	path = cleanPath(path)
	if p.Connection.matchCleanRoute(method, path) {
		return true
	}
	if len(p.subjects) == 0 {
		return false
	}
	if subject == "" {
		for _, r := range p.subjects {
			if r.matchCleanRoute(method, path) {
				return true
			}
		}
		return false
	}
	r, ok := p.lookup(subject)
	return ok && r.matchCleanRoute(method, path)
}

// CheckSubjects reports the first malformed entry of approval_subjects.
// Refused: more than MaxSubjects, two subjects that fold to the same,
// an entry without rules, and a malformed rule (Rules.Check). A subject
// must be 1 to 256 bytes of a display string, without spaces at its ends.
func CheckSubjects(subjects map[string]Rules) error {
	if len(subjects) > MaxSubjects {
		return fmt.Errorf("approval: more than %d subjects", MaxSubjects)
	}
	seen := make(map[string]string, len(subjects))
	for s, r := range subjects {
		if s == "" || len(s) > maxSubjectSize || !utf8.ValidString(s) || strings.TrimSpace(s) != s {
			return fmt.Errorf("approval: subject %q must be 1-%d bytes without spaces at either end", s, maxSubjectSize)
		}
		if err := display.Check(s); err != nil {
			return fmt.Errorf("approval: subject %q %w", s, err)
		}
		if other, ok := seen[foldSubject(s)]; ok {
			return fmt.Errorf("approval: subjects %q and %q are the same subject (case is not significant); join their rules", min(s, other), max(s, other))
		}
		seen[foldSubject(s)] = s
		if r.Empty() {
			return fmt.Errorf("approval: subject %q has no rule", s)
		}
		if err := r.Check(); err != nil {
			return fmt.Errorf("approval: subject %q: %s", s, strings.TrimPrefix(err.Error(), "approval: "))
		}
	}
	return nil
}

// foldSubject is the form subjects are compared in: trimmed of spaces and
// case folded. It costs no allocation for a subject already in it.
func foldSubject(s string) string {
	folded := s != "" && s[0] != ' ' && s[len(s)-1] != ' '
	for i := 0; folded && i < len(s); i++ {
		c := s[i]
		folded = c >= ' ' && c < 0x7f && (c < 'A' || c > 'Z')
	}
	if folded {
		return s
	}
	// Upper then lower folds what lower alone leaves apart: the long s
	// and "s", the final sigma and sigma.
	return strings.ToLower(strings.ToUpper(strings.TrimSpace(s)))
}

// matchCleanRoute is MatchRoute on a path already decoded and cleaned.
func (r Rules) matchCleanRoute(method, path string) bool {
	for _, p := range r.Routes {
		m, glob, _ := strings.Cut(p, " ")
		if (m == "*" || strings.EqualFold(m, method)) && toolpolicy.Match(cleanPath(glob), path) {
			return true
		}
	}
	return false
}

// Subject returns the rules p adds for subject, matched as HoldsTool
// matches it; the zero Rules when it adds none.
func (p *Policy) Subject(subject string) Rules {
	r, _ := p.lookup(subject)
	return r
}

// lookup finds subject's rules. An ASCII subject is folded on the stack,
// so a call for a subject without rules allocates nothing.
func (p *Policy) lookup(subject string) (Rules, bool) {
	s := strings.TrimSpace(subject) // as foldSubject trims
	var buf [maxSubjectSize]byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || i == len(buf) {
			r, ok := p.subjects[foldSubject(subject)]
			return r, ok
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	r, ok := p.subjects[string(buf[:len(s)])]
	return r, ok
}
