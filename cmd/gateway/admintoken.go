package main

import (
	"context"
	"fmt"

	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/kit/envconf"
)

func init() {
	register(&command{name: "admin-token", summary: "print the admin API's bearer token", run: runAdminToken, vars: adminTokenVars})
}

// runAdminToken prints GATEWAY_ADMIN_TOKEN, else the token kept in the
// data directory (made there if absent, as the gateway does at start), so
// that a local admin call is one command:
//
//	curl -H "Authorization: Bearer $(gateway admin-token)" …
func runAdminToken(_ context.Context, env *cliEnv, args []string) error {
	fs := newBareFlagSet("admin-token")
	const synopsis = "\n\nPrints the admin token: GATEWAY_ADMIN_TOKEN, else the one in GATEWAY_DATA_DIR/admin-token " +
		"(made if absent). Changing where or how a stored secret is sent through the admin API needs it."
	if err := parseFlags(env, fs, synopsis, args); err != nil {
		return err
	}
	r := envconf.New(env.getenv)
	dir, tok := readDataDir(r, env.getenv), readAdminToken(r)
	if err := r.Err(); err != nil {
		return err
	}
	if tok == "" {
		var err error
		if tok, err = gateway.AdminToken(dir); err != nil {
			return err
		}
	}
	fmt.Fprintln(env.stdout, tok)
	return nil
}

// adminTokenVars are the variables of admin-token.
func adminTokenVars() []envconf.Var {
	r := envconf.New(func(string) string { return "" })
	readDataDir(r, func(string) string { return "" })
	readAdminToken(r)
	return r.Vars()
}
