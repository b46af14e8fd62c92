package approval

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/idnhq/idn/mcpproxy/toolpolicy"
)

// Rules are approval rules: the calls that wait for the owner's passkey,
// a connection's or one subject's (see Policy). In JSON they are the
// connection fields of the same names. The zero Rules matches nothing.
type Rules struct {
	// Tools are approval_tools: MCP tool-name patterns with the tool
	// lists' wildcards ('*' any run, '?' one character).
	Tools []string `json:"approval_tools,omitempty"`
	// Routes are approval_routes: "METHOD /path-glob" patterns for
	// /proxy/{id}/…, matched against the path after the connection id.
	// METHOD may be "*"; the glob uses the same wildcards.
	Routes []string `json:"approval_routes,omitempty"`
}

// Empty reports whether r matches no call, so a connection without rules
// pays nothing.
func (r Rules) Empty() bool { return len(r.Tools) == 0 && len(r.Routes) == 0 }

// MatchTool reports whether the MCP tool name needs an approval.
func (r Rules) MatchTool(name string) bool {
	for _, p := range r.Tools {
		if toolpolicy.Match(p, name) {
			return true
		}
	}
	return false
}

// MatchRoute reports whether an HTTP call needs an approval. escapedPath
// is the path after /proxy/{id} as sent. It is decoded and cleaned
// (repeated and trailing slashes dropped) before matching, because the
// upstream resolves it that way: "/pay//" must not slip past "/pay".
func (r Rules) MatchRoute(method, escapedPath string) bool {
	if len(r.Routes) == 0 {
		return false
	}
	path, err := url.PathUnescape(escapedPath)
	if err != nil {
		return true // unreadable: ask the owner rather than guess
	}
	return r.matchCleanRoute(method, cleanPath(path))
}

// cleanPath folds repeated slashes and drops a trailing one.
func cleanPath(p string) string {
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	if p == "" {
		p = "/"
	}
	return p
}

// Limits of a rule list.
const (
	MaxRules       = 64
	maxPatternSize = 256
)

// Check reports the first malformed rule: a tool pattern must be 1 to 256
// printable bytes; a route must be "METHOD /glob" with an HTTP token (or
// "*") for METHOD.
func (r Rules) Check() error {
	if len(r.Tools) > MaxRules || len(r.Routes) > MaxRules {
		return fmt.Errorf("approval: more than %d rules", MaxRules)
	}
	for _, p := range r.Tools {
		if !printable(p) {
			return fmt.Errorf("approval: tool pattern %q must be 1-%d printable bytes", p, maxPatternSize)
		}
	}
	for _, p := range r.Routes {
		if err := checkRoute(p); err != nil {
			return err
		}
	}
	return nil
}

var errRoute = errors.New(`must be "METHOD /path-glob", e.g. "POST /v1/payments/*"`)

func checkRoute(p string) error {
	m, glob, ok := strings.Cut(p, " ")
	if !ok || !printable(p) || !strings.HasPrefix(glob, "/") || strings.Contains(glob, " ") || (m != "*" && !token(m)) {
		return fmt.Errorf("approval: route %q %w", p, errRoute)
	}
	return nil
}

func printable(s string) bool {
	if s == "" || len(s) > maxPatternSize {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}

func token(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}
