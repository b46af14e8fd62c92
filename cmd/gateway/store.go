package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/pgstore"
	"github.com/idnhq/idn/credvault/sqlitestore"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/kit/envconf"
)

// openVault opens the store in the data directory for a one-shot command,
// with the master key of fs's --master-key flag or the environment.
func openVault(ctx context.Context, env *cliEnv, fs *flag.FlagSet) (*credvault.Vault, func(), error) {
	r := envconf.New(env.getenv)
	dir, key, databaseURL := readStore(r, env.getenv, flagString(fs, "master-key"))
	if err := r.Err(); err != nil {
		return nil, nil, err
	}
	st, closeStore, err := openStore(ctx, dir, databaseURL)
	if err != nil {
		return nil, nil, err
	}
	v, err := credvault.New(ctx, credvault.Config{Store: st, MasterKey: key, PollInterval: -1, Extensions: gateway.VaultExtensions()})
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	return v, func() { v.Close(); closeStore() }, nil
}

// openStore opens the credential store: the PostgreSQL database a fleet
// shares when databaseURL is set, else gateway.db in dir.
func openStore(ctx context.Context, dir, databaseURL string) (credvault.Store, func(), error) {
	if databaseURL != "" {
		st, err := pgstore.Open(ctx, pgstore.Config{URL: databaseURL})
		if err != nil {
			return nil, nil, err
		}
		return st, func() { st.Close() }, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("creating data directory: %w", err)
	}
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, sqlitestore.DefaultFileName))
	if err != nil {
		return nil, nil, err
	}
	return st, func() { st.Close() }, nil
}
