package claimcache

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"maps"
	"time"

	"github.com/idnhq/idn/internal/heldmem"
)

// view is what a Cache holds for a service: a snapshot built from one full
// read, and the changes applied since in a small map over it. Like the
// snapshot, a view is immutable; applying changes makes a new one (see
// editor), so lookups take no lock. Once the changes outnumber
// foldThreshold they are folded into a new snapshot, which bounds both the
// map's memory and the copy each batch of changes makes of it.
type view struct {
	base    *snapshot
	over    map[tuple]overlay // changed tuples; nil when none
	version string            // the source's version of this state
	claims  int               // distinct tuples held
	skipped int               // records and changes left out as malformed or foreign
}

// tuple is the key of a claim.
type tuple struct {
	publicKey [ed25519.PublicKeySize]byte
	namespace string
}

// overlay is a changed tuple: its claim, or a removal (id ""), which
// names the claim the owner revoked or rejected.
type overlay struct {
	id         string
	approvedAt int64  // Unix milliseconds, as in a slot
	revoked    string // a removal's claim
	rejected   bool   // the removal is a rejection
}

// foldThreshold is the number of changed tuples past which a view's
// changes are folded into a new snapshot: a sixteenth of the snapshot,
// and at least 4,096, so that folding (which rebuilds the snapshot) costs
// a small constant per change.
func foldThreshold(base *snapshot) int { return max(4096, base.claims/16) }

// newView returns the view of a freshly built snapshot.
func newView(s *snapshot) *view {
	return &view{base: s, version: s.version, claims: s.claims, skipped: s.skipped}
}

// find returns the claim id and approval time of the tuple, from the
// view's changes or else its snapshot, as snapshot.find does.
func (v *view) find(namespace string, key *[ed25519.PublicKeySize]byte) (id string, approvedAt int64, ok bool) {
	if v.over != nil {
		return v.findChanged(namespace, key)
	}
	return v.base.find(namespace, key)
}

// findChanged is find for a view with changes, apart so that a lookup in
// a view without them does not pay for building the changes' map key.
func (v *view) findChanged(namespace string, key *[ed25519.PublicKeySize]byte) (string, int64, bool) {
	if o, ok := v.over[tuple{*key, namespace}]; ok {
		return o.id, o.approvedAt, o.id != ""
	}
	return v.base.find(namespace, key)
}

// endedClaim returns the claim whose revocation or rejection removed the
// tuple, when a change since the last full read did ("" otherwise), and
// whether it was a rejection.
func (v *view) endedClaim(namespace string, publicKey []byte) (id string, rejected bool) {
	if v.over == nil || len(publicKey) != ed25519.PublicKeySize {
		return "", false
	}
	o := v.over[tuple{[ed25519.PublicKeySize]byte(publicKey), namespace}]
	return o.revoked, o.rejected
}

// editor applies one delivery of changes to a copy of a view. The copy of
// the map is made at the first change, so a delivery with none costs
// nothing. A removal leaves a marker naming the revoked or rejected claim,
// so that a lookup can tell that caller from one never asked about; folding drops
// the markers, so they are remembered for a sixteenth of the snapshot's
// size in changes (at least 4,096).
type editor struct {
	service string
	held    *heldmem.Counter // counts the arrays of a fold
	from    *view
	next    view
	copied  bool
}

func (v *view) edit(service string, held *heldmem.Counter) *editor {
	return &editor{service: service, held: held, from: v, next: *v}
}

// apply applies one change; a malformed or foreign one is counted as
// skipped, as the builder does with records.
func (e *editor) apply(ch Change) error {
	c := ch.Claim
	if c.Service != e.service || c.ID == "" || len(c.ID) > maxClaimIDLen ||
		c.Namespace == "" || len(c.Namespace) > maxNamespaceLen {
		e.next.skipped++
		return nil
	}
	pub, err := ParsePublicKey(c.PublicKey)
	if err != nil {
		e.next.skipped++
		return nil
	}
	if !e.copied {
		e.next.over = maps.Clone(e.from.over)
		if e.next.over == nil {
			e.next.over = map[tuple]overlay{}
		}
		e.copied = true
	}
	k := tuple{[ed25519.PublicKeySize]byte(pub), c.Namespace}
	held, _, had := e.next.find(c.Namespace, &k.publicKey)
	switch {
	case !ch.Delete:
		e.next.over[k] = overlay{id: c.ID, approvedAt: c.ApprovedAt.UnixMilli()}
		if !had {
			e.next.claims++
		}
	case had && held == c.ID:
		// The removal stays as a marker of the revocation, until the
		// changes are folded into a new snapshot.
		e.next.over[k] = overlay{revoked: c.ID, rejected: ch.Rejected}
		e.next.claims--
	case !had:
		e.next.over[k] = overlay{revoked: c.ID, rejected: ch.Rejected}
	}
	return nil
}

// done returns the edited view at version, folded into a new snapshot when
// its changes have grown past foldThreshold.
func (e *editor) done(version string) (*view, error) {
	v := e.next
	v.version = version
	if len(v.over) <= foldThreshold(v.base) {
		return &v, nil
	}
	b := &builder{service: e.service, held: e.held}
	var err error
	v.base.each(func(ns string, pub *[ed25519.PublicKeySize]byte, a Approval) bool {
		if _, changed := v.over[tuple{*pub, ns}]; !changed {
			err = b.add(Claim{ID: a.ClaimID, Namespace: ns, PublicKey: formatKey(pub[:]), Service: e.service, ApprovedAt: a.ApprovedAt})
		}
		return err == nil
	})
	for k, o := range v.over {
		if err == nil && o.id != "" {
			err = b.add(Claim{ID: o.id, Namespace: k.namespace, PublicKey: formatKey(k.publicKey[:]), Service: e.service, ApprovedAt: time.UnixMilli(o.approvedAt)})
		}
	}
	if err != nil {
		return nil, err
	}
	snap, err := b.build(version)
	if err != nil {
		return nil, fmt.Errorf("claimcache: folding changes: %w", err)
	}
	folded := newView(snap)
	folded.skipped = v.skipped
	return folded, nil
}

// formatKey is the feed's form of a raw key, for ParsePublicKey.
func formatKey(raw []byte) string { return "ed25519:" + base64.StdEncoding.EncodeToString(raw) }
