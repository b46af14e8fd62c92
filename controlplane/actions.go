package controlplane

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/idnhq/idn/controlplane/internal/actions"
	"github.com/idnhq/idn/controlplane/internal/claims"
	"github.com/idnhq/idn/pairing/pairwire"
)

// ownsService reports whether owner owns the service slug, for the action
// requests a paired gateway files.
func (s *Server) ownsService(ctx context.Context, owner, slug string) (bool, error) {
	svcs, err := s.claims.Services(ctx, owner)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(svcs, func(svc claims.Service) bool { return svc.Slug == slug }), nil
}

// actionRequested tells the owner of a new action request: the
// action.requested webhooks of its service.
func (s *Server) actionRequested(ctx context.Context, a actions.Action) {
	ctx = context.WithoutCancel(ctx)
	if err := s.hooks.QueueAction(ctx, a.Namespace, a.Service, a.ID, a.AgentNS, a.AgentKey, a.AgentName, a.Subject, a.CreatedAt); err != nil {
		s.log.ErrorContext(ctx, "queue action.requested webhooks failed", "action_id", a.ID, "err", err)
		return
	}
	s.hooks.Wake()
}

// ownerKeys is the owner_keys and owner_keys_update of a paired
// gateway's ready message.
func (s *Server) ownerKeys(ctx context.Context, ns string) (keys, update json.RawMessage, err error) {
	k, update, err := s.actions.Pinned(ctx, ns)
	if err != nil {
		return nil, nil, err
	}
	keys, err = json.Marshal(k)
	return keys, update, err
}

// pairedGateways lists ns's paired gateways.
func (s *Server) pairedGateways(ctx context.Context, ns string) ([]actions.PairedGateway, error) {
	gws, err := s.gateways.Gateways(ctx, ns)
	out := make([]actions.PairedGateway, 0, len(gws))
	for _, g := range gws {
		out = append(out, actions.PairedGateway{ID: g.ID, PairedAt: g.CreatedAt})
	}
	return out, err
}

// sendOwnerKeys brings a signed key-set change to gateway id.
func (s *Server) sendOwnerKeys(ctx context.Context, ns, id string, update json.RawMessage) (json.RawMessage, error) {
	return s.gateways.Call(ctx, ns, id, pairwire.MethodOwnerKeysUpdate, map[string]json.RawMessage{"update": update})
}
