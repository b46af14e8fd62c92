// Package claimcache keeps the approved-claims snapshot a gateway checks
// every signed request against, and submits claims for
// callers that are not approved yet.
//
// A claim approves the tuple <namespace, public key, service>. A Cache holds,
// per service slug, a snapshot built from one complete read of a Source and
// swapped atomically, so a lookup never sees half a feed. A lookup reads one
// pilot and one slot of a perfect-hash table (and, for a namespace over 16
// bytes, the cell after the slot, which holds the rest of it and is read
// side by side with the slot), allocates nothing and takes no lock. A
// snapshot holds about 94 bytes per claim (93 more for a namespace over 16
// bytes); Cache.HeldBytes reports what its snapshots hold, which
// gctune.Tune leaves out of the collector's headroom. A snapshot is fresh for Config.TTL after the refresh that produced
// (or confirmed) it began; past that, and before the first load, Lookup
// fails closed with ErrUnavailable. A timer ends that lease, so lookups read
// no clock. Run refreshes every service in the background, and a miss (or a
// stale snapshot) asks for one early refresh (at most one per service per
// Config.EarlyRefreshInterval), so a claim approved a moment ago works on the
// caller's next attempt instead of after a full poll interval. The early
// refresh runs in Run's goroutine; the lookup that asked for it is not
// delayed and still reports the miss.
//
// A Source that is also a ChangeSource is read in full once; after that a
// refresh asks only for the changes since the version held, applies them
// to a small map over the snapshot (folded into a new snapshot once they
// grow past a sixteenth of it), and reads everything again only when the
// source no longer has those changes. A refresh then costs the control
// plane and the gateway in proportion to what changed, not to the number
// of claims. A Source that is also a WaitingSource can hold a request for
// changes until one comes: Run keeps one such request open per service
// (Options.ChangeWait long), so an approval or a revocation reaches the
// cache as soon as it commits, and polls only when the source answers
// without waiting or a request fails.
//
// HTTPSource reads the control plane's paginated feed
// (GET /v1/namespaces/claims) and its changes (?since=<cursor>, held with
// &wait=<seconds>), decoding
// each page as it arrives, one claim at a time; Submitter submits claims
// (POST /v1/claims) under a per connection + namespace rate limit, and
// answers a repeat of a recently submitted tuple from a bounded memory of
// receipts, so a polling agent keeps its claim id; each namespace holds at
// most a share of that memory and a namespace past it forgets its own
// oldest receipt, not another's. Both take the caller's
// *http.Client, so the gateway can pass one that signs its requests, and
// both take the service API key from a callback and never write it into an
// error or a log.
//
// ErrUnavailable, ErrNotApproved, ErrRevoked, ErrRejected, ErrLookupFailed
// and ErrRateLimited are plain sentinels (errors.Is); the gateway's proxy
// gives them their codes. A caller whose claim the cache saw revoked or
// rejected is answered a *RevokedError or *RejectedError that names the
// claim, so the gateway answers it instead of filing a new claim.
//
// Package claimcachetest serves the control plane's claims API from memory,
// for tests of a Cache, a Submitter or a gateway that embeds them.
//
// Configuration follows the repository's one rule: the zero value of every
// field of Config, Options, SubmitterConfig and SubmitterOptions is the safe
// one (a required field left empty is refused), and a protection is turned
// off only by a field that says so: a negative number, an explicit off
// value, or an Insecure… switch.
package claimcache
