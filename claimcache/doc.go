// Package claimcache keeps the approved-claims snapshot a gateway checks
// every signed request against, and submits claims for callers that are
// not approved yet.
//
// A claim approves the tuple <namespace, public key, service>. A Cache holds
// one snapshot per service slug, built from one complete read of a Source
// and swapped atomically, so a lookup never sees half a feed. A lookup
// allocates nothing and takes no lock. Past Config.TTL without a refresh,
// Lookup fails closed with ErrUnavailable. Cache.HeldBytes reports what the
// snapshots hold, which gctune.Tune leaves out of the collector's headroom.
//
//	cache, err := claimcache.New(claimcache.Config{
//		Source:   &claimcache.HTTPSource{BaseURL: controlPlaneURL, APIKey: apiKey},
//		Services: []string{"github"},
//	})
//	go cache.Run(ctx)
//	approval, err := cache.Lookup("github", "alice", agentKey)
//
// Run refreshes every service in the background. A miss asks for one early
// refresh, so a claim approved a moment ago works on the caller's next try.
// A Source that is also a ChangeSource is read in full once, then only for
// its changes. A WaitingSource can hold a request until a change comes, so
// an approval or a revocation reaches the cache as soon as it commits.
//
// HTTPSource reads the control plane's paginated feed
// (GET /v1/namespaces/claims) and its changes (?since=<cursor>, held with
// &wait=<seconds>). Submitter files claims (POST /v1/claims) under a rate
// limit per connection and namespace. It answers a repeat from a bounded
// memory of receipts, so a polling agent keeps its claim id. Both take the
// caller's *http.Client, so the gateway can pass one that signs its
// requests. Both take the service API key from a callback and never write
// it into an error or a log.
//
// ErrUnavailable, ErrNotApproved, ErrRevoked, ErrRejected, ErrLookupFailed
// and ErrRateLimited are plain sentinels (errors.Is); the gateway's proxy
// gives them their codes. A caller whose claim the cache saw revoked or
// rejected gets a *RevokedError or *RejectedError that names the claim. The
// gateway then answers with it instead of filing a new claim.
//
// Package claimcachetest serves the control plane's claims API from memory,
// for tests of a Cache, a Submitter or a gateway that embeds them.
//
// Configuration follows the repository's one rule: the zero value of every
// field of Config, Options, SubmitterConfig and SubmitterOptions is the safe
// one, and a required field left empty is refused. A protection is turned
// off only by a field that says so: a negative number, an explicit off
// value, or an Insecure… switch.
//
// docs/gateway.md ("Claims cache", "Memory") tells how the snapshots are
// looked up, refreshed and sized.
package claimcache
