package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"time"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/kit/envconf"
	"github.com/idnhq/idn/registry/evm"
)

func init() {
	register(&command{
		name:    "registry",
		summary: "deploy or inspect the on-chain registry",
		sub: []*command{{
			name: "deploy",
			summary: "deploy the IDNRegistry contract with RELAYER_PRIVATE_KEY (its owner and relayer) " +
				"and print its address for IDN_REGISTRY_ADDRESS",
			vars:  func() []envconf.Var { return registryVars(false) },
			setup: func(*flag.FlagSet) func(context.Context, *cliEnv, []string) error { return runRegistryDeploy },
		}, {
			name: "status",
			summary: "print the chain id, the relayer's address and balance, the contract's owner and relayer, " +
				"and the registry writes the database owes",
			vars:  func() []envconf.Var { return registryVars(true) },
			setup: func(*flag.FlagSet) func(context.Context, *cliEnv, []string) error { return runRegistryStatus },
		}},
	})
}

// chainSettings are the settings of registry writes besides
// BLOCKCHAIN_MODE.
type chainSettings struct {
	network  string // BLOCKCHAIN_NETWORK
	explorer string // the network's block explorer
	evm      evm.Config
}

// readChain reads BLOCKCHAIN_NETWORK, BLOCKCHAIN_RPC_URL (default: the
// network's public endpoint), IDN_REGISTRY_ADDRESS and RELAYER_PRIVATE_KEY.
// A non-empty needer (what needs them, e.g. "BLOCKCHAIN_MODE=queue") makes
// the key required, and the address too when needAddress; values given
// are checked either way, and never repeated in a problem.
func readChain(r *envconf.Reader, needer string, needAddress bool) chainSettings {
	var c chainSettings
	c.network = r.OneOf("BLOCKCHAIN_NETWORK", evm.Mainnet, []string{evm.Mainnet, evm.Testnet},
		"registry chain: mainnet (Base, chain 8453) or testnet (Base Sepolia, chain 84532); start-up refuses an RPC endpoint on another chain")
	network, err := evm.LookupNetwork(c.network)
	if err != nil {
		network, _ = evm.LookupNetwork(evm.Mainnet) // the problem is recorded by OneOf
	}
	c.explorer, c.evm.ChainID = network.Explorer, network.ChainID
	// The URL of a hosted node often carries an API key.
	c.evm.RPCURL = r.Secret("BLOCKCHAIN_RPC_URL", "JSON-RPC endpoint (http, https, ws, wss) of the registry's chain; "+
		"unset: the network's public endpoint, which is rate-limited")
	if c.evm.RPCURL == "" {
		c.evm.RPCURL = network.RPCURL
	} else if u, err := url.Parse(c.evm.RPCURL); err != nil || u.Host == "" ||
		(u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "ws" && u.Scheme != "wss") {
		r.Problemf("BLOCKCHAIN_RPC_URL must be an http(s) or ws(s) URL")
	}
	if v := r.String("IDN_REGISTRY_ADDRESS", "", "0x address of the IDNRegistry contract (`controlplane registry deploy` deploys one); "+
		"required when BLOCKCHAIN_MODE is not disabled"); v != "" {
		if c.evm.Contract, err = evm.ParseAddress(v); err != nil {
			r.Problemf("IDN_REGISTRY_ADDRESS must be the registry contract's 0x address")
		}
	} else if needer != "" && needAddress {
		r.Problemf("%s needs IDN_REGISTRY_ADDRESS, the registry contract (`controlplane registry deploy` deploys one)", needer)
	}
	if v := r.Secret("RELAYER_PRIVATE_KEY", "hex secp256k1 key of the account that signs and pays for registry writes; "+
		"the contract accepts writes from it alone (required when BLOCKCHAIN_MODE is not disabled)"); v != "" {
		if c.evm.Key, err = evm.ParseKey(v); err != nil {
			r.Problemf("RELAYER_PRIVATE_KEY must be a secp256k1 private key in hex")
		}
	} else if needer != "" {
		r.Problemf("%s needs RELAYER_PRIVATE_KEY, the key of the account that writes registry transactions", needer)
	}
	return c
}

// registryVars are the variables of the registry commands, for --help.
func registryVars(withStore bool) []envconf.Var {
	empty := func(string) string { return "" }
	r := envconf.New(empty)
	readChain(r, "", false)
	if withStore {
		readStorage(r, empty)
	}
	return r.Vars()
}

func runRegistryDeploy(ctx context.Context, env *cliEnv, _ []string) error {
	r := envconf.New(env.getenv)
	c := readChain(r, "controlplane registry deploy", false)
	if err := r.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	addr, tx, err := evm.Deploy(ctx, c.evm)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "deployed on %s (chain %d) by transaction %s\n%s/address/%s\n",
		c.network, c.evm.ChainID, tx, c.explorer, addr.Hex())
	fmt.Fprintln(env.stdout, addr.Hex())
	return nil
}

func runRegistryStatus(ctx context.Context, env *cliEnv, _ []string) error {
	r := envconf.New(env.getenv)
	c := readChain(r, "controlplane registry status", true)
	_, sc := readStorage(r, env.getenv)
	if err := r.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := evm.Inspect(ctx, c.evm)
	if err != nil {
		return err
	}
	w := env.stdout
	fmt.Fprintf(w, "network   %s (chain %d), block %d\n", c.network, st.ChainID, st.Block)
	fmt.Fprintf(w, "relayer   %s, balance %s ETH, next nonce %d\n", st.Relayer.Hex(), st.BalanceEther(), st.Nonce)
	switch {
	case !st.Deployed:
		fmt.Fprintf(w, "registry  %s: no contract at this address\n", st.Contract.Hex())
	case st.ContractRelayer != st.Relayer:
		fmt.Fprintf(w, "registry  %s, owner %s, relayer %s: NOT this key, writes will revert\n",
			st.Contract.Hex(), st.ContractOwner.Hex(), st.ContractRelayer.Hex())
	default:
		fmt.Fprintf(w, "registry  %s, owner %s, relayer: this key\n", st.Contract.Hex(), st.ContractOwner.Hex())
	}
	fmt.Fprintf(w, "explorer  %s/address/%s\n", c.explorer, st.Contract.Hex())
	store, err := controlplane.Open(ctx, sc)
	if err != nil {
		return err
	}
	defer store.Close()
	q, err := store.RegistryBacklog(ctx)
	if err != nil {
		return err
	}
	oldest := "none"
	if !q.Oldest.IsZero() {
		oldest = q.Oldest.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "queue     %d owed (%d retrying, oldest %s), %d given up\n", q.Owed, q.Retrying, oldest, q.GivenUp)
	for _, e := range q.LastErrors {
		fmt.Fprintf(w, "  failed  %s\n", e)
	}
	return nil
}
