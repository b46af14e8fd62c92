package claimcache

import (
	"errors"
	"fmt"
)

// Sentinel errors. The gateway answers the first six with the codes named
// below (package proxy maps them); the last three are signals between a
// Source and the Cache.
var (
	// ErrUnavailable means the service's claims were never loaded or are
	// older than the TTL: the cache fails closed (503 AUTH_CLAIMS_UNAVAILABLE).
	ErrUnavailable = errors.New("claimcache: claims unavailable")
	// ErrNotApproved means a fresh snapshot holds no approved claim for the
	// tuple (403 AUTH_CLAIM_REQUIRED).
	ErrNotApproved = errors.New("claimcache: no approved claim")
	// ErrLookupFailed means the lookup itself could not be made, e.g. the
	// service is not tracked or the key is malformed (500
	// AUTH_CLAIMS_LOOKUP_FAILED).
	ErrLookupFailed = errors.New("claimcache: claim lookup failed")
	// ErrRevoked means the tuple's claim was revoked since the cache last
	// read the whole feed (403 AUTH_CLAIM_REVOKED): a lookup answers it as
	// a *RevokedError, which also matches ErrNotApproved.
	ErrRevoked = errors.New("claimcache: claim revoked")
	// ErrRejected means the owner rejected the tuple's claim since the
	// cache last read the whole feed (403 AUTH_CLAIM_REJECTED): a lookup
	// answers it as a *RejectedError, which also matches ErrNotApproved.
	ErrRejected = errors.New("claimcache: claim rejected")
	// ErrRateLimited means a claim submission was refused by the local rate
	// limit (429 AUTH_CLAIM_SUBMIT_RATE_LIMITED); nothing was sent.
	ErrRateLimited = errors.New("claimcache: claim submission rate-limited")
	// ErrNotModified is returned by a Source when the claims still have the
	// version the caller already holds.
	ErrNotModified = errors.New("claimcache: claims not modified")
	// ErrFeedChanged is returned by a Source when the claims changed while
	// they were being read, so the delivery may be incomplete; the Cache
	// discards it and reads again.
	ErrFeedChanged = errors.New("claimcache: feed changed during read")
	// ErrVersionExpired is returned by a ChangeSource that cannot deliver
	// the changes since a version: it no longer keeps them, or the version
	// is not one it can continue from. The Cache reads everything again.
	ErrVersionExpired = errors.New("claimcache: changes since this version are not available")
)

// StatusError reports an unexpected HTTP answer from the control plane. It
// carries the status and the envelope's code, never the request's key.
type StatusError struct {
	Op         string // "feed" or "submit"
	StatusCode int
	Code       string // the error envelope's "code", when it was one of package errcode
}

func (e *StatusError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("claimcache: %s: control plane answered %d %s", e.Op, e.StatusCode, e.Code)
	}
	return fmt.Sprintf("claimcache: %s: control plane answered %d", e.Op, e.StatusCode)
}

// RevokedError is a lookup's answer for a tuple whose claim the cache saw
// revoked: errors.Is matches it with ErrRevoked and ErrNotApproved.
type RevokedError struct {
	ClaimID string // the revoked claim
}

func (e *RevokedError) Error() string { return "claimcache: claim " + e.ClaimID + " was revoked" }

// Is reports whether target is ErrRevoked or ErrNotApproved.
func (e *RevokedError) Is(target error) bool { return target == ErrRevoked || target == ErrNotApproved }

// RejectedError is a lookup's answer for a tuple whose claim the cache saw
// rejected: errors.Is matches it with ErrRejected and ErrNotApproved.
type RejectedError struct {
	ClaimID string // the rejected claim
}

func (e *RejectedError) Error() string { return "claimcache: claim " + e.ClaimID + " was rejected" }

// Is reports whether target is ErrRejected or ErrNotApproved.
func (e *RejectedError) Is(target error) bool {
	return target == ErrRejected || target == ErrNotApproved
}
