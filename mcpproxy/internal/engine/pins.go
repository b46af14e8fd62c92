package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/mcpproxy/internal/catalog"
	"github.com/idnhq/idn/mcpproxy/toolpin"
)

// ToolPins keeps the approved definition of each tool of each connection
// (package toolpin), for Config.Pins. The gateway keeps them in its
// credential store.
type ToolPins interface {
	// Pins returns connectionID's pins as they are now; nil when no
	// complete listing was ever observed.
	Pins(connectionID string) *toolpin.Record
	// Observe is told of every listing of connectionID's tools the proxy
	// reads (complete: every page of it) and keeps what it changes
	// (toolpin.Record.Observe): the first complete listing's pins, the
	// changed and new definitions that wait for review.
	Observe(ctx context.Context, connectionID string, listed []toolpin.Listed, complete bool) error
}

// PinKeeper is the proxy's side of Config.Pins: what it tells the pins
// of each listing, and what it asks them of each tool.
type PinKeeper struct {
	pins    ToolPins // nil: every tool passes
	log     *slog.Logger
	timeout time.Duration // of a seed's observation
}

// Observe tells Config.Pins of c, a listing of connection id's tools.
func (k PinKeeper) Observe(ctx context.Context, id string, c *catalog.Catalog, complete bool) {
	if k.pins == nil {
		return
	}
	if err := k.pins.Observe(ctx, id, c.Pins(), complete); err != nil {
		k.log.ErrorContext(ctx, "mcpproxy: keeping the tool pins failed; changed tools stay hidden", "request_id", apierror.RequestIDFrom(ctx),
			"connection_id", id, "error", err.Error())
	}
}

// Pinned returns whether the tools of connection id that c lists pass
// its pins: a tool passes when it is pinned with the definition c has.
// Without Config.Pins every tool passes.
func (k PinKeeper) Pinned(id string, c *catalog.Catalog) func(tool string) bool {
	if k.pins == nil {
		return func(string) bool { return true }
	}
	rec := k.pins.Pins(id)
	return func(tool string) bool { return rec.Allows(tool, c.Pin(tool).SHA256) }
}

// Keeps reports whether Config.Pins is set.
func (k PinKeeper) Keeps() bool { return k.pins != nil }

// seed observes seed, a discovery stored by an earlier run, as a
// complete listing when connection id has no pins yet: that run read it.
// Otherwise a gateway upgraded to pinning would hide every tool its REST
// routes serve from the seed until the next discovery.
func (k PinKeeper) seed(id string, seed *catalog.Catalog) {
	if seed == nil || k.pins == nil || !seed.Succeeded() || k.pins.Pins(id) != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.timeout)
	defer cancel()
	k.Observe(ctx, id, seed, true)
}
