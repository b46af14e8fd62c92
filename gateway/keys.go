package gateway

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/idnhq/idn/identity"
)

// connectionKey is the service API key presented for a connection's claim
// submissions.
func (g *Gateway) connectionKey(connectionID string) (string, error) {
	if g.cfg.ConnectionAPIKey != nil {
		if key := g.cfg.ConnectionAPIKey(connectionID); key != "" {
			return key, nil
		}
	}
	return keyOrError(g.cfg.ServiceAPIKey, connectionID)
}

// serviceKey picks the feed key of a service: the key of a connection that
// uses that slug and has a key of its own, else ServiceAPIKey.
func (g *Gateway) serviceKey(service string) (string, error) {
	if g.cfg.ConnectionAPIKey != nil {
		for _, c := range g.vault.Connections() {
			if c.ServiceSlug() == service {
				if key := g.cfg.ConnectionAPIKey(c.ID); key != "" {
					return key, nil
				}
			}
		}
	}
	return keyOrError(g.cfg.ServiceAPIKey, service)
}

func keyOrError(key, name string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("gateway: no service API key for %q (Config.ServiceAPIKey or Config.ConnectionAPIKey)", name)
	}
	return key, nil
}

func loadOrCreateIdentity(home, namespace string) (*identity.Identity, error) {
	id, err := identity.Load(home, namespace)
	if errors.Is(err, identity.ErrNotFound) {
		if id, err = identity.New(namespace); err == nil {
			err = id.Save(home)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("gateway: identity: %w", err)
	}
	return id, nil
}

// installSalt returns the per-install salt of the decision-log
// fingerprints, creating it on first use.
func installSalt(dir string) ([]byte, error) {
	path := filepath.Join(dir, "log-salt")
	salt, err := os.ReadFile(path)
	if err == nil && len(salt) == 32 {
		return salt, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("decision-log salt: %w", err)
	}
	salt = make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, salt, 0o600); err != nil {
		return nil, fmt.Errorf("decision-log salt: %w", err)
	}
	return salt, nil
}
