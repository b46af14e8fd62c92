package mcpproxy

import (
	"context"

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

// observePins tells Config.Pins of c, a listing of connection id's tools.
func (p *Proxy) observePins(ctx context.Context, id string, c *catalog.Catalog, complete bool) {
	if p.pins == nil {
		return
	}
	if err := p.pins.Observe(ctx, id, c.Pins(), complete); err != nil {
		p.log.ErrorContext(ctx, "mcpproxy: keeping the tool pins failed; changed tools stay hidden", "request_id", apierror.RequestIDFrom(ctx),
			"connection_id", id, "error", err.Error())
	}
}

// pinned returns whether the tools of connection id that c lists pass
// its pins: a tool passes when it is pinned with the definition c has.
// Without Config.Pins every tool passes.
func (p *Proxy) pinned(id string, c *catalog.Catalog) func(tool string) bool {
	if p.pins == nil {
		return func(string) bool { return true }
	}
	rec := p.pins.Pins(id)
	return func(tool string) bool { return rec.Allows(tool, c.Pin(tool).SHA256) }
}

// pinSeed observes seed, a discovery stored by an earlier run, as a
// complete listing when connection id has no pins yet: that run read it.
// Otherwise a gateway upgraded to pinning would hide every tool its REST
// routes serve from the seed until the next discovery.
func (p *Proxy) pinSeed(id string, seed *catalog.Catalog) {
	if seed == nil || p.pins == nil || !seed.Succeeded() || p.pins.Pins(id) != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	p.observePins(ctx, id, seed, true)
}
