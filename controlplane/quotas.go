package controlplane

import (
	"github.com/idnhq/idn/controlplane/internal/claims"
	"github.com/idnhq/idn/controlplane/internal/signed"
)

// Per-namespace quotas. One owner (one namespace) may hold at most:
//
//   - Config.MaxServices services: past it 409 SERVICE_LIMIT_REACHED. Keys
//     and webhooks are capped per service, so they are bounded per
//     namespace too;
//   - Config.MaxOpenPairings pairing sessions that can still complete
//     (neither used, ended nor expired): past it 429 PAIRING_LIMIT_REACHED
//     with Retry-After until the oldest expires. Expired sessions are
//     deleted by Server.Maintain;
//   - Config.MaxGateways paired gateways: past it 409
//     GATEWAY_LIMIT_REACHED, when a pairing session is started and again
//     when one completes;
//   - Config.MaxSessions live sessions: a login, sign-up or sign-in link
//     past it is 429 SESSION_LIMIT_REACHED with Retry-After until the
//     oldest expires (the owner may end sessions instead).
//
// Each count and the insert it guards run in one transaction that holds
// the namespace's row, so concurrent requests cannot overshoot.
const (
	DefaultMaxServices     = claims.DefaultMaxServices
	DefaultMaxOpenPairings = 5
	DefaultMaxGateways     = 25
	DefaultMaxSessions     = 100
)

// Defaults of the signed routes' admission limits (Config).
const (
	// DefaultSignedRatePerMinute is CONTROLPLANE_SIGNED_RATE_LIMIT_PER_MINUTE's
	// default: requests to the signed routes per client network per minute.
	DefaultSignedRatePerMinute = signed.DefaultSignedRatePerMinute
	// DefaultMaxLookupNonces is CONTROLPLANE_LOOKUP_NONCE_MAX_ENTRIES's
	// default: nonces of public lookups remembered in memory.
	DefaultMaxLookupNonces = signed.DefaultMaxLookupNonces
)
