package main

import (
	"context"
	"fmt"

	"github.com/idnhq/idn/credvault"
)

func init() {
	register(&command{name: "keygen", summary: "print a new random master key (standard base64 of 32 bytes)", run: runKeygen})
}

func runKeygen(_ context.Context, env *cliEnv, args []string) error {
	fs := newBareFlagSet("keygen")
	if err := parseFlags(env, fs, "\n\nPrints a fresh master key for GATEWAY_MASTER_KEY. Keep it secret; without it the store cannot be read.", args); err != nil {
		return err
	}
	k, err := credvault.GenerateMasterKey()
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, k.Encode())
	return nil
}
