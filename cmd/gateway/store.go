package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/kit/envconf"
)

// openVault opens the store in the data directory for a one-shot command,
// with the master key of fs's --master-key flag or the environment.
func openVault(ctx context.Context, env *cliEnv, fs *flag.FlagSet) (*credvault.Vault, func(), error) {
	r := envconf.New(env.getenv)
	dir, key := readStore(r, env.getenv, flagString(fs, "master-key"))
	if err := r.Err(); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("creating data directory: %w", err)
	}
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, sqlitestore.DefaultFileName))
	if err != nil {
		return nil, nil, err
	}
	v, err := credvault.New(ctx, credvault.Config{Store: st, MasterKey: key, PollInterval: -1, Extensions: gateway.VaultExtensions()})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return v, func() { v.Close(); st.Close() }, nil
}
