package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/kit/envconf"
)

func init() {
	register(&command{
		name: "provision",
		summary: "create a namespace and a service with an API key, for a gateway to read the claims feed with " +
			"(once: an existing --api-key-file is kept)",
		vars: provisionVars,
		setup: func(fs *flag.FlagSet) func(context.Context, *cliEnv, []string) error {
			var p provisioning
			fs.StringVar(&p.namespace, "namespace", "", "namespace that owns the service, created without passkeys when absent (required)")
			fs.StringVar(&p.service, "service", "", "the service's slug (required)")
			fs.StringVar(&p.name, "name", "", "the service's display name (default: the slug)")
			fs.StringVar(&p.keyFile, "api-key-file", "", "write the API key to this file (0600) instead of stdout; "+
				"when the file exists already, nothing is created")
			return func(ctx context.Context, env *cliEnv, _ []string) error { return runProvision(ctx, env, p) }
		},
	})
}

// provisioning is the provision command line.
type provisioning struct {
	namespace, service, name, keyFile string
}

func provisionVars() []envconf.Var {
	r := envconf.New(func(string) string { return "" })
	readStorage(r, func(string) string { return "" })
	return r.Vars()
}

// runProvision sets up what a gateway needs to read the claims feed
// without the dashboard: the service and its API key. With --api-key-file
// it runs once per file, so a deployment can run it at every start (the
// compose file does) without minting a key each time.
func runProvision(ctx context.Context, env *cliEnv, p provisioning) error {
	if p.namespace == "" || p.service == "" {
		return usagef("--namespace and --service are required")
	}
	if p.keyFile != "" {
		if _, err := os.Stat(p.keyFile); err == nil {
			fmt.Fprintf(env.stderr, "%s exists: service %s of namespace %s is provisioned already\n", p.keyFile, p.service, p.namespace)
			return nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	r := envconf.New(env.getenv)
	_, sc := readStorage(r, env.getenv)
	if err := r.Err(); err != nil {
		return err
	}
	store, err := controlplane.Open(ctx, sc)
	if err != nil {
		return err
	}
	defer store.Close()
	// Provisioning signs no session: the server it runs through needs a
	// JWT secret all the same, and gets one that ends with the process.
	secret := make([]byte, 32)
	rand.Read(secret)
	srv, err := controlplane.New(controlplane.Config{Store: store, JWTSecret: secret})
	if err != nil {
		return err
	}
	defer srv.Close()
	key, err := srv.Provision(ctx, p.namespace, controlplane.ServiceSpec{Slug: p.service, Name: p.name})
	if err != nil {
		return err
	}
	if p.keyFile == "" {
		fmt.Fprintln(env.stdout, key)
		return nil
	}
	if err := writeKeyFile(p.keyFile, key); err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "provisioned service %s of namespace %s; its API key is in %s\n", p.service, p.namespace, p.keyFile)
	return nil
}

// writeKeyFile writes the key (0600) through a temporary file in the same
// folder, so a reader never sees half a key.
func writeKeyFile(path, key string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".api-key-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(strings.TrimSpace(key) + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
