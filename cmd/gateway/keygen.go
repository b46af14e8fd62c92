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
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(env.stdout, "usage: gateway keygen\n\nPrints a fresh master key for GATEWAY_MASTER_KEY. Keep it secret; without it the store cannot be read.")
		return errHelpShown
	}
	if len(args) > 0 {
		return usagef("keygen takes no arguments")
	}
	k, err := credvault.GenerateMasterKey()
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, k.Encode())
	return nil
}
