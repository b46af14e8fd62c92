package web

import (
	"strings"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/identity"
)

// reservedNamespaces are the literal segments of the API's paths that are
// valid namespace names. A namespace so named could be shadowed by a route
// (GET /v1/namespaces/claims is the feed, not the namespace "claims"), now
// or when a route is added, so no new namespace may take one. Compared in
// lower case, so a look-alike in another case is refused too.
var reservedNamespaces = map[string]bool{
	"account": true, "actions": true, "activity": true, "approve": true, "challenge": true, "deny": true, "assets": true, "auth": true, "claims": true, "connect": true, "deliveries": true,
	"gateways": true, "pairings": true, "rpc": true, "oauth": true, "callback": true,
	"did": true, "health": true, "identifiers": true, "keys": true, "live": true,
	"login": true, "logout": true, "metrics": true, "namespaces": true, "options": true,
	"passkeys": true, "ready": true, "reject-pending": true, "seed": true,
	"services": true, "sessions": true, "settings": true, "signin": true,
	"signin-link": true, "signin-links": true, "signup": true, "test": true, "export": true, "unverified": true,
	"verify": true, "webhooks": true, "well-known": true,
}

// NamespaceProblem is the answer saying why ns cannot name a new
// namespace, or nil: it must pass the identity rule and not be a reserved
// word.
func NamespaceProblem(ns string) *apierror.Error {
	if identity.ValidNamespace(ns) != nil {
		return ErrInvalidNamespace.With("details", map[string]string{"namespace": ns})
	}
	if reservedNamespaces[strings.ToLower(ns)] {
		return Validation("namespace %q is reserved: it is a word of the API's paths", ns).
			With("details", map[string]string{"namespace": ns, "reason": "reserved"})
	}
	return nil
}
