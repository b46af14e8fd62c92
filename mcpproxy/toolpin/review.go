package toolpin

import "time"

// Review is a Record as a reviewer reads it: what is pinned, and what
// waits, each waiting definition with its changes from the pinned one.
type Review struct {
	Pinned  []ReviewedPin     `json:"pinned"`
	Pending []ReviewedPending `json:"pending"`
}

// ReviewedPin is one pinned tool.
type ReviewedPin struct {
	Name string `json:"name"`
	Pin
}

// ReviewedPending is one definition waiting for review. Change is
// "changed" (PinnedSHA256 and Diff say from what) or "new".
type ReviewedPending struct {
	Name         string     `json:"name"`
	Change       string     `json:"change"`
	SHA256       string     `json:"sha256"`
	SeenAt       time.Time  `json:"seen_at"`
	Definition   Definition `json:"definition"`
	PinnedSHA256 string     `json:"pinned_sha256,omitempty"`
	Diff         []Change   `json:"diff,omitempty"`
}

// Review returns r for review, in name order; a nil r has nothing.
func (r *Record) Review() Review {
	out := Review{Pinned: []ReviewedPin{}, Pending: []ReviewedPending{}}
	if r == nil {
		return out
	}
	for _, name := range Names(r.Tools) {
		out.Pinned = append(out.Pinned, ReviewedPin{Name: name, Pin: r.Tools[name]})
	}
	for _, name := range Names(r.Pending) {
		p := r.Pending[name]
		rp := ReviewedPending{Name: name, Change: EventNew, SHA256: p.SHA256, SeenAt: p.SeenAt, Definition: p.Definition}
		if pin, ok := r.Tools[name]; ok {
			rp.Change, rp.PinnedSHA256 = EventChanged, pin.SHA256
			// A stored definition has a canonical form (it was hashed),
			// so Diff cannot fail on it.
			rp.Diff, _ = Diff(pin.Definition, p.Definition)
		}
		out.Pending = append(out.Pending, rp)
	}
	return out
}
