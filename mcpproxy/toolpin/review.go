package toolpin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/idnhq/idn/identity/display"
)

// Review is a Record as a reviewer reads it: what is pinned, and what
// waits, each waiting definition with its changes from the pinned one.
type Review struct {
	Pinned   []ReviewedPin       `json:"pinned"`
	Pending  []ReviewedPending   `json:"pending"`
	Rejected []ReviewedRejection `json:"rejected"`
}

// ReviewedRejection is one rejected definition.
type ReviewedRejection struct {
	Name string `json:"name"`
	Rejection
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
	out := Review{Pinned: []ReviewedPin{}, Pending: []ReviewedPending{}, Rejected: []ReviewedRejection{}}
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
	for _, name := range Names(r.Rejected) {
		out.Rejected = append(out.Rejected, ReviewedRejection{Name: name, Rejection: r.Rejected[name]})
	}
	return out
}

// Print writes rv for a terminal: one tool a line, each change of a
// changed definition below it, a new one's whole definition. Every string
// of the server's goes through display.Shown, so terminal controls or
// invisible characters in a tool name or description show escaped.
func (rv Review) Print(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "pinned: %d\n", len(rv.Pinned))
	for _, p := range rv.Pinned {
		fmt.Fprintf(&b, "  %s  %s  by %s at %s\n", display.Shown(p.Name), p.SHA256, display.Shown(p.PinnedBy), p.PinnedAt.Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "waiting for review: %d\n", len(rv.Pending))
	for _, p := range rv.Pending {
		fmt.Fprintf(&b, "  %s  %s  %s  seen at %s\n", display.Shown(p.Name), p.Change, p.SHA256, p.SeenAt.Format(time.RFC3339))
		if p.Change == EventNew {
			raw, _ := json.Marshal(p.Definition)
			c, err := Canonical(raw)
			if err != nil {
				c = raw
			}
			fmt.Fprintf(&b, "      definition: %s\n", display.Shown(string(c)))
		}
		for _, c := range p.Diff {
			fmt.Fprintf(&b, "      %s\n", display.Shown(c.Path))
			if c.Before != nil {
				fmt.Fprintf(&b, "        before: %s\n", display.Shown(string(c.Before)))
			}
			if c.After != nil {
				fmt.Fprintf(&b, "        after:  %s\n", display.Shown(string(c.After)))
			}
		}
	}
	if len(rv.Rejected) > 0 {
		fmt.Fprintf(&b, "rejected: %d\n", len(rv.Rejected))
	}
	for _, r := range rv.Rejected {
		fmt.Fprintf(&b, "  %s  %s  by %s at %s\n", display.Shown(r.Name), r.SHA256, display.Shown(r.RejectedBy), r.RejectedAt.Format(time.RFC3339))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
