package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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

// AdminTokenFile is the file of DataDir that holds the admin token when
// Config.Admin.Token is empty.
const AdminTokenFile = "admin-token"

// AdminToken returns the admin token kept in dataDir/admin-token,
// creating it (32 random bytes, hex, mode 0600) when the file is absent.
// Every process on the data directory gets the same token: the gateway at
// start, and the command-line tool that prints it for a local client.
func AdminToken(dataDir string) (string, error) {
	path := filepath.Join(dataDir, AdminTokenFile)
	if tok, err := readAdminToken(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("gateway: admin token: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	// Written aside (CreateTemp makes it 0600), then linked into place:
	// the link fails if another process created the file meanwhile, and
	// nobody reads a partial file.
	tmp, err := os.CreateTemp(dataDir, AdminTokenFile+".*")
	if err != nil {
		return "", fmt.Errorf("gateway: admin token: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(hex.EncodeToString(raw) + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if err = os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
			err = nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("gateway: admin token: %w", err)
	}
	return readAdminToken(path)
}

func readAdminToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 16 {
		return "", fmt.Errorf("gateway: admin token file %s holds fewer than 16 characters; delete it to have a new one made", path)
	}
	return tok, nil
}
