package controlplane

import (
	"context"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"sync"
	"time"

	"github.com/idnhq/idn/controlplane/internal/registrywriter"
	"github.com/idnhq/idn/controlplane/internal/webhooks"
)

// WebhookConfig configures webhooks to services (Config.Webhooks); see
// webhooks.Config.
type WebhookConfig = webhooks.Config

// EventWebhookTest is the event type of a test delivery; see
// webhooks.EventTest.
const EventWebhookTest = webhooks.EventTest

// initWebhooks builds the webhook part and the registry writer from the
// configuration.
func (s *Server) initWebhooks() error {
	// The registry's loop polls as often as the webhooks'.
	setDefault(&s.cfg.Webhooks.PollInterval, time.Second)
	reg, err := registrywriter.New(s.cfg.Registry, s.store.db, s.log, s.now)
	if err != nil {
		return err
	}
	s.registry = reg
	deps := webhooks.Deps{DB: s.store.db, Kit: s.kit, AlertTo: s.webhookAlertAddress,
		Owner: s.sessions.Owner}
	if s.cfg.Metrics != nil {
		deps.Metrics = s.cfg.Metrics
	}
	s.hooks, err = webhooks.New(s.cfg.Webhooks, deps)
	return err
}

// webhookAlertAddress is the account setting that says where the owner of
// ns wants the alerts of failing webhooks.
func (s *Server) webhookAlertAddress(ctx context.Context, ns string) (string, bool, error) {
	set, err := s.accounts.Settings(ctx, ns)
	switch {
	case errors.Is(err, sqldb.ErrNamespaceNotFound):
		return "", true, nil
	case err != nil:
		return "", false, err
	}
	return set.Email, set.WebhookFailuresNotify, nil
}

// runWorkers delivers webhooks and registry writes until ctx ends, then
// returns ctx's error. Each kind of work has its own loop, so a slow
// registry never holds up webhooks; both poll the database every
// Webhooks.PollInterval and are woken at once by claim changes made
// through this Server. Any number of instances may run it against one
// database: deliveries and registry jobs are leased row by row, so each is
// attempted by one worker at a time. Start runs it once per Server.
func (s *Server) runWorkers(ctx context.Context) error {
	var wg sync.WaitGroup
	if r := s.registry; r != nil {
		wg.Go(func() {
			t := time.NewTicker(s.cfg.Webhooks.PollInterval)
			defer t.Stop()
			for {
				if err := r.RunDue(ctx); err != nil && ctx.Err() == nil {
					s.log.ErrorContext(ctx, "registry pass failed", "err", err)
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				case <-r.Wake():
				}
			}
		})
	}
	err := s.hooks.Run(ctx)
	wg.Wait()
	return err
}
