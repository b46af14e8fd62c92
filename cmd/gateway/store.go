package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/internal/gatewayd"
)

// dataDir returns GATEWAY_DATA_DIR, else the default of
// gatewayd.DefaultDataDir, creating it with mode 0700.
func dataDir(getenv func(string) string) (string, error) {
	dir := getenv("GATEWAY_DATA_DIR")
	if dir == "" {
		var err error
		if dir, err = gatewayd.DefaultDataDir(getenv); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating data directory: %w", err)
	}
	return dir, nil
}

// masterKey reads --master-key, else GATEWAY_MASTER_KEY.
func masterKey(getenv func(string) string, flagValue string) (credvault.MasterKey, error) {
	s := flagValue
	if s == "" {
		s = getenv("GATEWAY_MASTER_KEY")
	}
	if s == "" {
		return credvault.MasterKey{}, errors.New("no master key: set GATEWAY_MASTER_KEY or pass --master-key (make one with `gateway keygen`)")
	}
	return credvault.ParseMasterKey(s)
}

// openVault opens the store in the data directory for a one-shot command,
// with the master key of fs's --master-key flag or the environment.
func openVault(ctx context.Context, env *cliEnv, fs *flag.FlagSet) (*credvault.Vault, func(), error) {
	key, err := masterKey(env.getenv, flagString(fs, "master-key"))
	if err != nil {
		return nil, nil, err
	}
	dir, err := dataDir(env.getenv)
	if err != nil {
		return nil, nil, err
	}
	st, err := credvault.OpenSQLite(ctx, filepath.Join(dir, credvault.DefaultFileName))
	if err != nil {
		return nil, nil, err
	}
	v, err := credvault.New(ctx, credvault.Config{Store: st, MasterKey: key, PollInterval: -1})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return v, func() { v.Close(); st.Close() }, nil
}
