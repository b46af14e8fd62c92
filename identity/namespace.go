package identity

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidNamespace is returned for a namespace outside the rule
// "3-64 characters of a-z A-Z 0-9 -, alphanumeric at both ends".
var ErrInvalidNamespace = errors.New("identity: invalid namespace")

// ErrInvalidDID is returned by ParseDID for anything that is not a did:idn DID.
var ErrInvalidDID = errors.New("identity: invalid did:idn DID")

// ValidNamespace reports whether ns is a valid namespace. Namespaces are
// compared case-sensitively; SDKs create lower-case names.
func ValidNamespace(ns string) error {
	if len(ns) < 3 || len(ns) > 64 {
		return fmt.Errorf("%w %q: must be 3 to 64 characters", ErrInvalidNamespace, ns)
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		if isAlnum(c) || (c == '-' && i != 0 && i != len(ns)-1) {
			continue
		}
		return fmt.Errorf("%w %q: only a-z, A-Z, 0-9 and inner hyphens are allowed", ErrInvalidNamespace, ns)
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// DIDPrefix starts every idn DID.
const DIDPrefix = "did:idn:"

// DID returns the DID of a namespace, "did:idn:<namespace>".
func DID(namespace string) string { return DIDPrefix + namespace }

// ParsedDID is a did:idn DID split into its parts. The extended form is
// did:idn:<namespace>:<service>#<agent>#<subject>; every part after the
// namespace is optional, and a lone fragment after the namespace DID
// (did:idn:<namespace>#<fragment>) names a key, agent or subject.
type ParsedDID struct {
	Namespace string
	Service   string
	Agent     string // first fragment: an agent, or a key id fragment on a bare namespace DID
	Subject   string // second fragment
}

// String reassembles the DID.
func (d ParsedDID) String() string {
	var b strings.Builder
	b.WriteString(DIDPrefix)
	b.WriteString(d.Namespace)
	if d.Service != "" {
		b.WriteString(":" + d.Service)
	}
	if d.Agent != "" || d.Subject != "" {
		b.WriteString("#" + d.Agent)
	}
	if d.Subject != "" {
		b.WriteString("#" + d.Subject)
	}
	return b.String()
}

// ParseDID parses did:idn:<namespace>[:<service>][#<agent>[#<subject>]].
// The namespace must be valid; service, agent and subject must be non-empty
// when their separator is present and consist of visible ASCII other than
// ':' and '#'.
func ParseDID(s string) (ParsedDID, error) {
	var d ParsedDID
	rest, ok := strings.CutPrefix(s, DIDPrefix)
	if !ok {
		return d, fmt.Errorf("%w: %q does not start with %q", ErrInvalidDID, s, DIDPrefix)
	}
	rest, frag, hasFrag := strings.Cut(rest, "#")
	ns, svc, hasSvc := strings.Cut(rest, ":")
	if err := ValidNamespace(ns); err != nil {
		return d, fmt.Errorf("%w: %v", ErrInvalidDID, err)
	}
	d.Namespace = ns
	if hasSvc {
		if !validPart(svc) {
			return d, fmt.Errorf("%w: bad service part in %q", ErrInvalidDID, s)
		}
		d.Service = svc
	}
	if hasFrag {
		agent, subject, hasSubject := strings.Cut(frag, "#")
		if !validPart(agent) || (hasSubject && !validPart(subject)) {
			return d, fmt.Errorf("%w: bad fragment in %q", ErrInvalidDID, s)
		}
		d.Agent, d.Subject = agent, subject
	}
	return d, nil
}

func validPart(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == ':' || c == '#' {
			return false
		}
	}
	return true
}
