package mcpproxy

import "github.com/idnhq/idn/mcpproxy/toolpolicy"

// The tool policy is package toolpolicy's; these names keep its types
// reachable from this package, where Connection and Settings use them.
type (
	Policy        = toolpolicy.Policy
	SubjectPolicy = toolpolicy.SubjectPolicy
	Decision      = toolpolicy.Decision
	Source        = toolpolicy.Source
)

// The decision sources, as package toolpolicy names them.
const (
	SourceConnectionAllowlist = toolpolicy.SourceConnectionAllowlist
	SourceConnectionDenylist  = toolpolicy.SourceConnectionDenylist
	SourceSubjectAllowlist    = toolpolicy.SourceSubjectAllowlist
	SourceSubjectDenylist     = toolpolicy.SourceSubjectDenylist
	SourceDefaultAllow        = toolpolicy.SourceDefaultAllow
	SourceToolCap             = toolpolicy.SourceToolCap
)
