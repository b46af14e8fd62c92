package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing"
)

// connectionKey is the service API key presented for a connection's claim
// submissions: the connection's own, else ServiceAPIKey, else none on a
// paired gateway, whose signature stands for its owner's services.
func (g *Gateway) connectionKey(connectionID string) (string, error) {
	if g.cfg.ConnectionAPIKey != nil {
		if key := g.cfg.ConnectionAPIKey(connectionID); key != "" {
			return key, nil
		}
	}
	if g.cfg.ServiceAPIKey != "" || g.paired() {
		return g.cfg.ServiceAPIKey, nil
	}
	return "", &MissingKeyError{Connections: []string{connectionID}}
}

// serviceKey picks the feed key of a service: the key of a connection that
// uses that slug and has a key of its own, else ServiceAPIKey, else none
// on a paired gateway.
func (g *Gateway) serviceKey(service string) (string, error) {
	var ids []string
	for _, c := range g.vault.Connections() {
		if c.ServiceSlug() != service {
			continue
		}
		if g.cfg.ConnectionAPIKey != nil {
			if key := g.cfg.ConnectionAPIKey(c.ID); key != "" {
				return key, nil
			}
		}
		ids = append(ids, c.ID)
	}
	if g.cfg.ServiceAPIKey != "" || g.paired() {
		return g.cfg.ServiceAPIKey, nil
	}
	return "", &MissingKeyError{Service: service, Connections: ids}
}

// paired reports whether the gateway is paired (Config.Paired).
func (g *Gateway) paired() bool {
	if g.cfg.Paired != nil {
		return g.cfg.Paired()
	}
	_, ok, _, _ := pairing.StatusOf(g.PairingFiles())
	return ok
}

// MissingKeyError is a service whose claims an unpaired gateway can neither
// read nor file, for want of a service API key. Its text names the
// variables of cmd/gateway that would supply one.
type MissingKeyError struct {
	// Service is the service slug; empty when only connections are known.
	Service string
	// Connections are the ids of the connections that use it.
	Connections []string
}

// Settings are the variables of cmd/gateway that would give the service a
// key: one per connection (IDN_SERVICE_API_KEY_<ID upper-cased, '-' as
// '_'>), then IDN_SERVICE_API_KEY.
func (e *MissingKeyError) Settings() []string {
	out := make([]string, 0, len(e.Connections)+1)
	for _, id := range e.Connections {
		out = append(out, serviceKeyVariable(id))
	}
	return append(out, "IDN_SERVICE_API_KEY")
}

func (e *MissingKeyError) Error() string {
	what := "connection " + strconv.Quote(strings.Join(e.Connections, ", "))
	if e.Service != "" {
		what = "service " + strconv.Quote(e.Service)
	}
	return "gateway: no service API key for " + what + ": set " + strings.Join(e.Settings(), " or ") +
		" (Config.ConnectionAPIKey, Config.ServiceAPIKey) and restart, or pair the gateway with its owner's dashboard (gateway pair)"
}

// serviceKeyVariable is the variable of cmd/gateway that holds the service
// API key of one connection: IDN_SERVICE_API_KEY_ followed by its id
// upper-cased, '-' written '_'.
func serviceKeyVariable(connectionID string) string {
	return "IDN_SERVICE_API_KEY_" + strings.ToUpper(strings.ReplaceAll(connectionID, "-", "_"))
}

// checkConnection refuses, before it is stored, a connection whose claims
// the gateway could neither read nor file: no key for its service and no
// pairing, or, on a pairing without a key, a service the control plane
// says is not the owner's. Connections that skip the claim check need
// none.
func (g *Gateway) checkConnection(ctx context.Context, c *credvault.Connection) error {
	if g.cfg.Proxy.InsecureAllowUnsigned || slices.Contains(g.cfg.Proxy.InsecureUnsignedConnections, c.ID) {
		return nil
	}
	// The connection's own key (or the shared one, or the pairing) files
	// its claims and, once it is stored, reads its service's feed too.
	key, err := g.connectionKey(c.ID)
	if err != nil {
		e := &MissingKeyError{Service: c.ServiceSlug(), Connections: []string{c.ID}}
		return apierror.Coded(errcode.ServiceAPIKeyMissing, fmt.Sprintf(
			"this gateway has no service API key for connection %q (service %q) and is not paired, so it could neither read nor file its claims: "+
				"set %s or IDN_SERVICE_API_KEY and restart the gateway, or pair it with your dashboard (gateway pair)",
			c.ID, c.ServiceSlug(), serviceKeyVariable(c.ID))).With("settings", e.Settings())
	}
	if key == "" && g.notOwnersService(ctx, c.ServiceSlug()) {
		return apierror.Coded(errcode.ServiceNotFound, fmt.Sprintf(
			"the control plane has no service %q of the owner this gateway is paired with: create it in the dashboard first, or name one of the owner's services",
			c.ServiceSlug()))
	}
	return nil
}

// probeTimeout bounds the feed read of notOwnersService.
const probeTimeout = 5 * time.Second

// errProbed ends notOwnersService's feed read at its first claim.
var errProbed = errors.New("gateway: probed")

// notOwnersService reads, on the pairing alone, at most one claim of
// service's feed, and reports whether the control plane refused it as a
// service that is not the paired owner's (or does not exist). Any other
// outcome, an unreachable control plane included, says nothing against
// the service.
func (g *Gateway) notOwnersService(ctx context.Context, service string) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	src := &claimcache.HTTPSource{BaseURL: g.cfg.ControlPlaneURL, Client: g.control, PageSize: 1,
		APIKey: func(string) (string, error) { return "", nil }}
	_, err := src.ApprovedClaims(ctx, service, "", func(claimcache.Claim) error { return errProbed })
	se, ok := errors.AsType[*claimcache.StatusError](err)
	return ok && se.Code == errcode.NamespaceForbidden.String()
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
