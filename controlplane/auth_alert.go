package controlplane

import (
	"github.com/idnhq/idn/controlplane/internal/alertmail"
)

// AlertConfig is how alert e-mail reaches owners and operators
// (Config.Webhooks.Alert); see alertmail.Config.
type AlertConfig = alertmail.Config
