package gateway

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing"
)

// A fleet is replicas on one shared store (Config.Store). They pair once:
// the gateway's identity, its pairing key and its pairing state live in
// the store as sealed blobs, not in each replica's DataDir.
const (
	identityBlob      = "gateway/identity"
	pairingBlobPrefix = "pairing/"
)

// SharedPairingFiles keeps the pairing key and state of a fleet as blobs
// of the store under v (pairing.Config.Files), sealed with its master key.
// A pairing made through one replica, or by gateway pair, holds for all.
func SharedPairingFiles(v *credvault.Vault) pairing.Files { return storeFiles{v} }

type storeFiles struct{ vault *credvault.Vault }

func (f storeFiles) ReadFile(name string) ([]byte, error) {
	b, err := f.vault.Blob(pairingBlobPrefix + name)
	if errors.Is(err, credvault.ErrBlobNotFound) {
		return nil, fmt.Errorf("gateway: shared %s: %w", name, fs.ErrNotExist)
	}
	return b, err
}

// The pairing package's files carry no context; the store bounds its own
// waits (pgstore's connect timeout).
func (f storeFiles) WriteFile(name string, b []byte) error {
	return f.vault.PutBlob(context.Background(), pairingBlobPrefix+name, b, false)
}

// CreateFile writes in a store transaction that keeps a blob already
// there, and reloads the Vault, so ReadFile then shows the winner.
func (f storeFiles) CreateFile(name string, b []byte) error {
	return f.vault.PutBlob(context.Background(), pairingBlobPrefix+name, b, true)
}

// PairingFiles is where the gateway's pairing key and state are kept:
// its shared store's blobs when Config.Store is set, else DataDir.
func (g *Gateway) PairingFiles() pairing.Files {
	if g.cfg.Store != nil {
		return SharedPairingFiles(g.vault)
	}
	return pairing.DirFiles(g.cfg.DataDir)
}

// sharedIdentity is the identity of the fleet on Config.Store: the one
// stored there, or, for the first replica, its own (IdentityHome's,
// created if need be), stored for the others. Replicas starting together
// all end up with the first one stored.
func (g *Gateway) sharedIdentity(ctx context.Context) (*identity.Identity, error) {
	if _, err := g.vault.Blob(identityBlob); errors.Is(err, credvault.ErrBlobNotFound) {
		if err := g.offerIdentity(ctx); err != nil {
			return nil, err
		}
	}
	b, err := g.vault.Blob(identityBlob)
	if err != nil {
		return nil, fmt.Errorf("gateway: the fleet's identity: %w", err)
	}
	id, err := identity.ParseRecord(b)
	if err != nil {
		return nil, fmt.Errorf("gateway: the fleet's identity: %w", err)
	}
	if id.Namespace != g.cfg.Namespace {
		return nil, fmt.Errorf("gateway: the fleet's identity is of namespace %q, not %q (Config.Namespace, GATEWAY_IDN_NAMESPACE)", id.Namespace, g.cfg.Namespace)
	}
	return id, nil
}

// offerIdentity stores this replica's own identity as the fleet's unless
// another replica stored one first.
func (g *Gateway) offerIdentity(ctx context.Context) error {
	own, err := loadOrCreateIdentity(g.cfg.IdentityHome, g.cfg.Namespace)
	if err != nil {
		return err
	}
	rec, err := own.MarshalRecord()
	if err != nil {
		return fmt.Errorf("gateway: identity: %w", err)
	}
	if err := g.vault.PutBlob(ctx, identityBlob, rec, true); err != nil {
		return fmt.Errorf("gateway: storing the fleet's identity: %w", err)
	}
	return nil
}
