package claimcache

import (
	"context"
	"time"
)

// Change is one change to a service's approved claims. When Delete is
// false, Claim is approved: it is added, or replaces the claim its tuple
// had. When Delete is true, Claim no longer is: its tuple is removed if it
// holds this claim (by ID); only ID, Namespace, PublicKey and Service are
// needed. Rejected, with Delete, says the owner rejected the claim, which
// never was approved: the tuple's lookups answer it as a *RejectedError.
type Change struct {
	Delete   bool
	Rejected bool
	Claim
}

// ChangeSource is a Source that can also deliver only what changed. The
// Cache reads a ChangeSource in full once, then asks only for the changes
// since the version it holds, so a refresh costs the source (and the
// cache) in proportion to the changes, not to the number of claims.
type ChangeSource interface {
	Source
	// ClaimChanges calls apply for every change to service's approved
	// claims after version, a version that ApprovedClaims or ClaimChanges
	// returned, oldest first, and returns the version after the last change
	// it delivered (version itself when nothing changed). Applying them in
	// order to the set of that version gives the set of the returned one.
	// It returns an error wrapping ErrVersionExpired when it cannot deliver
	// the changes since version, and the error of apply, wrapped, as soon as
	// apply fails. A delivery that ends in an error is discarded by the
	// caller.
	ClaimChanges(ctx context.Context, service, version string, apply func(Change) error) (string, error)
}

// WaitingSource is a ChangeSource that can also hold a request for changes
// until one comes (a long poll). A Cache that holds a version of a
// WaitingSource's claims keeps one such request open per service, so a
// change reaches it as soon as the source has it instead of at the next
// poll.
type WaitingSource interface {
	ChangeSource
	// WaitClaimChanges is ClaimChanges, except that when no change follows
	// version it may wait up to wait for one before it answers, and then
	// answers as soon as one comes. A source that cannot wait answers at
	// once; the Cache takes an answer with no change within a second (or
	// half the wait, when shorter) as one, and polls.
	WaitClaimChanges(ctx context.Context, service, version string, wait time.Duration, apply func(Change) error) (string, error)
}
