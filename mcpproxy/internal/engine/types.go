package engine

import (
	"github.com/idnhq/idn/mcpproxy/mcpsettings"
	"github.com/idnhq/idn/mcpproxy/toolpolicy"
)

// The engine's words for the public packages' types, which mcpproxy
// names too.
type (
	Discovery = mcpsettings.Discovery
	Tool      = mcpsettings.Tool
	Policy    = toolpolicy.Policy
	Decision  = toolpolicy.Decision
)
