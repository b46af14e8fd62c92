package gateway

import (
	"context"
	"errors"
	"log/slog"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/kit/textcap"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/idnhq/idn/mcpproxy/toolpin"
	"github.com/idnhq/idn/pairing"
	"github.com/idnhq/idn/upstreamauth"
	"github.com/prometheus/client_golang/prometheus"
)

// The gateway pins its MCP connections' tool definitions beside each
// connection in its vault (credvault's tool pins, package toolpin's
// records): the engine serves only pinned definitions, and the admin API
// reviews, accepts and rejects the others.

// newToolPins returns the keeper of v's tool pins, counting what changes
// in idn_gateway_mcp_tool_pin_total{event} on reg, logging it to log and
// reporting it to the owner's activity trail (nil reporter: not paired).
func newToolPins(v *credvault.Vault, reg prometheus.Registerer, log *slog.Logger, reporter *pairing.Reporter) (*toolpin.Keeper, error) {
	counted := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idn_gateway_mcp_tool_pin_total",
		Help: "Changes of MCP connections' pinned tool definitions by event (pinned at the first listing, changed, new, accepted, rejected).",
	}, []string{"event"})
	if err := reg.Register(counted); err != nil {
		return nil, err
	}
	for _, e := range []string{toolpin.EventPinned, toolpin.EventChanged, toolpin.EventNew, toolpin.EventAccepted, toolpin.EventRejected} {
		counted.WithLabelValues(e)
	}
	return &toolpin.Keeper{Backend: v, OnEvent: func(id string, e toolpin.Event) {
		counted.WithLabelValues(e.Kind).Inc()
		if reporter != nil {
			reporter.Record(pinActivity(id, e, v))
		}
		tool := textcap.Clip(e.Tool, textcap.Name) // the server's choice
		switch e.Kind {
		case toolpin.EventChanged:
			log.Warn("gateway: an MCP tool's definition changed; the tool is hidden until its change is reviewed and accepted", "connection_id", id, "tool", tool)
		case toolpin.EventNew:
			log.Warn("gateway: an MCP server lists a new tool; it is hidden until it is reviewed and accepted", "connection_id", id, "tool", tool)
		case toolpin.EventRejected:
			log.Info("gateway: an MCP tool definition rejected; the tool stays hidden while the server lists it", "connection_id", id, "tool", tool)
		default:
			log.Info("gateway: MCP tool pinned", "connection_id", id, "tool", tool, "event", e.Kind)
		}
	}}, nil
}

// pinReview is the admin API's ToolPins over a keeper.
type pinReview struct{ keeper *toolpin.Keeper }

// reviewed is the answer of the tool-pins routes.
type reviewed struct {
	ConnectionID string `json:"connection_id"`
	toolpin.Review
}

func (p pinReview) Review(_ context.Context, id string) (any, error) {
	return reviewed{ConnectionID: id, Review: p.keeper.Pins(id).Review()}, nil
}

func (p pinReview) Accept(ctx context.Context, id string, tools map[string]string, by string) (any, error) {
	rec, err := p.keeper.Accept(ctx, id, tools, by)
	return answerDecision(id, rec, err)
}

func (p pinReview) Reject(ctx context.Context, id string, tools map[string]string, by string) (any, error) {
	rec, err := p.keeper.Reject(ctx, id, tools, by)
	return answerDecision(id, rec, err)
}

// answerDecision is the admin API's answer to a decision on connection
// id's pins.
func answerDecision(id string, rec *toolpin.Record, err error) (any, error) {
	if errors.Is(err, toolpin.ErrStale) {
		return nil, apierror.Coded(errcode.ValidationError, "a definition named is not the one waiting for review (the server changed it again, or it was decided already): review again").
			With("field", "tools")
	}
	if err != nil {
		return nil, err
	}
	return reviewed{ConnectionID: id, Review: rec.Review()}, nil
}

// ReviewToolPins returns the tool pins of v's mcp connection id as the
// admin API's tool-pins route answers them, for a program that has the
// vault but no running gateway (gateway pins). With discover, a discovery
// of the connection's tools with its stored credential runs first, and its
// listing is checked against the pins (the first one pins it); with
// accept and reject (tool name → hash), those definitions are then
// accepted or rejected, as by.
func ReviewToolPins(ctx context.Context, v *credvault.Vault, id string, discover bool, accept, reject map[string]string, by string) (toolpin.Review, error) {
	res, ok := v.Lookup(id)
	if !ok {
		return toolpin.Review{}, credvault.ErrNotFound
	}
	if res.Connection.Protocol != credvault.ProtocolMCP {
		return toolpin.Review{}, errors.New("gateway: tool pins belong to mcp connections")
	}
	keeper := &toolpin.Keeper{Backend: v}
	if discover {
		engine, err := mcpproxy.New(mcpproxy.Config{Pins: keeper})
		if err != nil {
			return toolpin.Review{}, err
		}
		defer engine.Close()
		settings, discovery, err := mcpproxy.DecodeSettings(res.Connection.Extensions)
		if err != nil {
			return toolpin.Review{}, err
		}
		tokens, err := upstreamauth.New(upstreamauth.Config{Vault: v})
		if err != nil {
			return toolpin.Review{}, err
		}
		if _, err := engine.Discover(ctx, mcpConnection(res, settings, discovery, v, tokens, nil, nil), mcpproxy.RefreshForce); err != nil {
			var ue *mcpproxy.UpstreamError
			if errors.As(err, &ue) {
				return toolpin.Review{}, errors.New("gateway: discovery failed: " + ue.Message)
			}
			return toolpin.Review{}, errors.New("gateway: discovery failed")
		}
	}
	if len(accept) > 0 {
		if _, err := keeper.Accept(ctx, id, accept, by); err != nil {
			return toolpin.Review{}, err
		}
	}
	if len(reject) > 0 {
		if _, err := keeper.Reject(ctx, id, reject, by); err != nil {
			return toolpin.Review{}, err
		}
	}
	return keeper.Pins(id).Review(), nil
}
