package controlplane

import (
	"context"

	"github.com/idnhq/idn/controlplane/internal/registrywriter"
)

// Registry is the on-chain identity registry the control plane writes to
// (registry/evm is the EVM backend); see registrywriter.Backend.
type Registry = registrywriter.Backend

// Registry write modes (BLOCKCHAIN_MODE); see RegistryConfig.Mode.
const (
	RegistryDisabled = registrywriter.Disabled
	RegistrySync     = registrywriter.Sync
	RegistryMemory   = registrywriter.Memory
	RegistryQueue    = registrywriter.Queue
)

// RegistryConfig selects registry writes (Config.Registry); see
// registrywriter.Config.
type RegistryConfig = registrywriter.Config

// RegistryBacklog is the state of the registry writes a database owes.
type RegistryBacklog = registrywriter.Backlog

// RegistryBacklog reads what registry writes the database owes (as
// `controlplane registry status` shows).
func (s *Store) RegistryBacklog(ctx context.Context) (RegistryBacklog, error) {
	return registrywriter.ReadBacklog(ctx, s.db)
}

// namespaceCreated tells the registry writer, if any, that sign-up
// created namespace ns.
func (s *Server) namespaceCreated(ctx context.Context, ns string) {
	if r := s.registry; r != nil {
		r.NamespaceCreated(ctx, ns)
	}
}
