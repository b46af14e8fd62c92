package controlplane

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/idnhq/idn/controlplane/internal/actions"
	"github.com/idnhq/idn/controlplane/internal/claims"
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

// ownerKeys is the owner_keys of a paired gateway's ready message.
func (s *Server) ownerKeys(ctx context.Context, ns string) (json.RawMessage, error) {
	keys, err := s.accounts.PinnedKeys(ctx, ns)
	if err != nil {
		return nil, err
	}
	return json.Marshal(keys)
}
