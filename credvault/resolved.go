package credvault

import (
	"errors"
	"maps"
	"slices"
)

// NewResolved returns c with its credential, for a program that keeps its
// connections and secrets somewhere other than a Vault (environment
// variables, another secret store) and serves them to a proxy. c is checked
// and completed with defaults as Vault.Create does (a *ValidationError
// names the field, never the secret); secret is the value of the secret
// named by c.AuthSecretKey ("" when it names none), taken as it is: a
// {{KEY}} reference in it fails with ErrCredentialUnresolved, since there
// are no variables to resolve it from. The Resolved holds a copy of c.
func NewResolved(c *Connection, secret string) (*Resolved, error) {
	if c == nil {
		return nil, errors.New("credvault: NewResolved: nil connection")
	}
	n := c.Clone()
	n.normalize()
	if len(n.Extensions) > 0 {
		// Nothing here knows what they mean: a Vault's Config.Extensions does.
		return nil, invalid(slices.Sorted(maps.Keys(n.Extensions))[0], "is not a field of a connection")
	}
	secrets := map[string]string{}
	if n.AuthSecretKey != "" {
		secrets[n.AuthSecretKey] = secret
	}
	if err := n.validateConfig(sortedKeys(secrets)); err != nil {
		return nil, err
	}
	if err := validateSecrets(secrets); err != nil {
		return nil, err
	}
	if n.AuthSecretKey == "" {
		secret = ""
	}
	resolved, err := resolveTemplate(secret, nil)
	if err != nil {
		return nil, err
	}
	r := &Resolved{Connection: n, secret: resolved, built: true, approvals: approvalPolicy(n)}
	r.base, r.baseErr = n.UpstreamBase()
	r.redactions = redactions(n, resolved, nil)
	return r, nil
}
