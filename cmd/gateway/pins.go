package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/mcpproxy/toolpin"
)

func init() {
	register(&command{name: "pins", summary: "review, accept and reject an mcp connection's pinned tool definitions", run: runPins})
}

// decisionFlags collects --accept or --reject NAME=SHA256.
type decisionFlags map[string]string

func (a decisionFlags) String() string { return "" }

func (a decisionFlags) Set(s string) error {
	name, sha, ok := strings.Cut(s, "=")
	if !ok || name == "" || sha == "" {
		return fmt.Errorf("takes NAME=SHA256, the hash shown for the definition reviewed")
	}
	a[name] = sha
	return nil
}

func runPins(ctx context.Context, env *cliEnv, args []string) error {
	const synopsis = "--id ID [--discover] [--accept NAME=SHA256 ...] [--reject NAME=SHA256 ...] [--accepted-by WHO] [--json]"
	fs := newFlagSet("pins")
	id := idFlag(fs)
	discover := fs.Bool("discover", false, "discover the connection's tools first, with its stored credential, and check them against the pins (the first discovery pins them)")
	accept, reject := decisionFlags{}, decisionFlags{}
	fs.Var(accept, "accept", "accept the waiting (or rejected) definition of tool NAME whose hash is SHA256 (repeatable; all or none)")
	fs.Var(reject, "reject", "reject the waiting definition of tool NAME whose hash is SHA256: it stays hidden and is not offered again (repeatable; all or none)")
	by := fs.String("accepted-by", "operator", "who accepts or rejects, as the pins record it")
	asJSON := jsonFlag(fs)
	if err := parseFlags(env, fs, synopsis, args); err != nil {
		return err
	}
	if err := requireID(*id); err != nil {
		return err
	}
	v, closeVault, err := openVault(ctx, env, fs)
	if err != nil {
		return err
	}
	defer closeVault()
	for name := range accept {
		if _, both := reject[name]; both {
			return usagef("%q is both accepted and rejected", name)
		}
	}
	rv, err := gateway.ReviewToolPins(ctx, v, *id, *discover, accept, reject, *by)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(env.stdout, struct {
			ConnectionID string `json:"connection_id"`
			toolpin.Review
		}{*id, rv})
	}
	if err := rv.Print(env.stdout); err != nil {
		return err
	}
	if len(rv.Pending) > 0 {
		// The name is the server's: quoted, so that it cannot write to the terminal.
		fmt.Fprintf(env.stdout, "accept one: gateway pins --id %s --accept %q\n", *id, rv.Pending[0].Name+"="+rv.Pending[0].SHA256)
		fmt.Fprintf(env.stdout, "or reject it: gateway pins --id %s --reject %q\n", *id, rv.Pending[0].Name+"="+rv.Pending[0].SHA256)
	}
	return nil
}

var _ flag.Value = decisionFlags{}
