package controlplane

import "net/http"

// WebhookConfig configures webhook delivery (issue 7): filled in by the
// webhook work.
type WebhookConfig struct{}

func (s *Server) initWebhooks() error { return nil }

func (s *Server) webhookRoutes(*http.ServeMux) {}
