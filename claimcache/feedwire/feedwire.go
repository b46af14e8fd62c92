// Package feedwire is the wire format of the approved-claims feed, shared
// by the control plane that serves it, the claims cache that reads it and
// the cache's test server: GET /v1/namespaces/claims answers a Page of the
// key's service's approved claims, and with ?since=<cursor> the Changes
// to them after the cursor. (The claims cache reads pages with a decoder
// of its own that never holds a page whole; its fuzz test holds it to
// Page.)
//
// A cursor is the decimal number of a service's last change seen (its
// change sequence; the full feed's pages carry the current one). Numbers
// grow by one with every change, and the changes of one service commit in
// number order, so "every change up to n" is a complete state: a client
// holding a snapshot at cursor n reaches the snapshot at m by applying the
// changes n+1…m in order. A push of changes can carry the same numbers.
package feedwire

import (
	"errors"
	"strconv"
	"time"
)

// SinceQuery is the feed's query parameter that asks for changes.
const SinceQuery = "since"

// WaitQuery is the changes' query parameter that holds the request, for
// at most that many seconds, until a change follows the cursor (a long
// poll): the answer comes as soon as the change commits, or with no change
// and the same cursor when the wait ends.
const WaitQuery = "wait"

// AfterQuery is the full feed's query parameter that continues a read
// after a claim (its claim_id), instead of at an offset: a page after the
// last claim of the previous one neither skips nor repeats a claim however
// the feed changes between the two.
const AfterQuery = "after"

// Change operations: the claim is approved (add it, or replace the tuple's
// claim), or it no longer is (remove the tuple if it holds that claim).
const (
	OpUpsert = "upsert"
	OpDelete = "delete"
)

// Page is the answer to a request without a cursor: one page of the
// service's approved claims, where it sits in the whole, and the cursor of
// the state it was read from ("" from a control plane without change
// numbers), from which the changes continue.
type Page struct {
	Claims     []Record   `json:"claims"`
	Pagination Pagination `json:"pagination"`
	Cursor     string     `json:"cursor,omitempty"`
}

// Pagination places a page: at most Limit claims from Offset on, of Total
// approved claims, and whether more follow it.
type Pagination struct {
	Limit   int  `json:"limit"`
	Offset  int  `json:"offset"`
	Total   int  `json:"total"`
	HasMore bool `json:"has_more"`
}

// Record is one approved claim on a page.
type Record struct {
	ClaimID    string    `json:"claim_id"`
	Namespace  string    `json:"namespace"`
	PublicKey  string    `json:"public_key"`
	Service    string    `json:"service"`
	ApprovedAt time.Time `json:"approved_at"`
	Subject    string    `json:"subject,omitempty"`
	AgentID    string    `json:"agent_id,omitempty"`
	AgentName  string    `json:"agent_name,omitempty"`
}

// Changes is the answer to a request with a cursor: the next changes,
// oldest first, the cursor after the last of them (the request's own when
// there are none), and whether more follow at once.
type Changes struct {
	Changes []Change `json:"changes"`
	Cursor  string   `json:"cursor"`
	More    bool     `json:"more"`
}

// StatusRejected is a delete's Status when the owner rejected the claim:
// it never was approved, and the tuple is refused for good until the
// owner approves it. A delete without a status removes an approved claim.
const StatusRejected = "rejected"

// Change is one change. A delete carries the claim's id, namespace,
// public key and service only, and a Status when it records a rejection.
// A client that knows no status takes a rejection for a delete of a claim
// its tuple does not hold, which changes nothing it holds.
type Change struct {
	Op         string    `json:"op"`
	Status     string    `json:"status,omitempty"`
	ClaimID    string    `json:"claim_id"`
	Namespace  string    `json:"namespace"`
	PublicKey  string    `json:"public_key"`
	Service    string    `json:"service"`
	ApprovedAt time.Time `json:"approved_at,omitzero"`
	Subject    string    `json:"subject,omitempty"`
	AgentID    string    `json:"agent_id,omitempty"`
	AgentName  string    `json:"agent_name,omitempty"`
}

// FormatCursor returns the cursor of change number seq.
func FormatCursor(seq int64) string { return strconv.FormatInt(seq, 10) }

// ErrCursorSyntax is returned by ParseCursor for anything but a decimal
// number from 0 to 2^63-1 without sign or leading zeros.
var ErrCursorSyntax = errors.New("feedwire: cursor must be a non-negative decimal number")

// ParseCursor returns the change number of cursor.
func ParseCursor(cursor string) (int64, error) {
	if cursor == "" || len(cursor) > 1 && cursor[0] == '0' || cursor[0] < '0' || cursor[0] > '9' {
		return 0, ErrCursorSyntax
	}
	n, err := strconv.ParseInt(cursor, 10, 64)
	if err != nil {
		return 0, ErrCursorSyntax
	}
	return n, nil
}
