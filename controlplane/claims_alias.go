package controlplane

import "github.com/idnhq/idn/controlplane/internal/claims"

// Claim is the authorisation of a (namespace, public key, service) tuple;
// see claims.Claim.
type Claim = claims.Claim

// Claim statuses.
const (
	StatusPending  = claims.StatusPending
	StatusApproved = claims.StatusApproved
	StatusRejected = claims.StatusRejected
	StatusRevoked  = claims.StatusRevoked
	StatusExpired  = claims.StatusExpired
)
