package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/idnhq/idn/registry/evm"
	"github.com/idnhq/idn/registry/evm/evmtest"
)

// TestRegistryCommands deploys the contract to a chain that calls itself
// Base Sepolia, reads its status, serves with queue writes to it, and
// refuses to serve against the wrong network.
func TestRegistryCommands(t *testing.T) {
	chain := evmtest.NewWithChainID(t, evm.ChainIDBaseSepolia)
	vars := map[string]string{
		"BLOCKCHAIN_NETWORK":  "testnet",
		"BLOCKCHAIN_RPC_URL":  chain.URL,
		"RELAYER_PRIVATE_KEY": hex.EncodeToString(crypto.FromECDSA(chain.Relayer)),
		"IDN_DATA_DIR":        t.TempDir(),
	}
	var stdout, stderr strings.Builder
	if code := run(context.Background(), []string{"registry", "deploy"}, env(vars), &stdout, &stderr); code != 0 {
		t.Fatalf("deploy: exit %d: %s", code, stderr.String())
	}
	addr := strings.TrimSpace(stdout.String())
	if _, err := evm.ParseAddress(addr); err != nil || !strings.Contains(stderr.String(), "chain 84532") {
		t.Fatalf("deploy printed %q, %q", addr, stderr.String())
	}
	if strings.Contains(stderr.String(), vars["RELAYER_PRIVATE_KEY"]) {
		t.Fatal("deploy printed the relayer key")
	}

	vars["IDN_REGISTRY_ADDRESS"] = addr
	stdout.Reset()
	if code := run(context.Background(), []string{"registry", "status"}, env(vars), &stdout, &stderr); code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr.String())
	}
	relayer := crypto.PubkeyToAddress(chain.Relayer.PublicKey).Hex()
	for _, want := range []string{"testnet (chain 84532)", "relayer   " + relayer + ", balance 999.", "relayer: this key",
		"sepolia.basescan.org/address/" + addr, "queue     0 owed (0 retrying, oldest none), 0 given up"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, stdout.String())
		}
	}

	vars["ENVIRONMENT"], vars["CONTROLPLANE_ADDR"], vars["BLOCKCHAIN_MODE"] = "local", "127.0.0.1:0", "queue"
	r, line := start(t, vars, "control plane listening")
	var listening struct{ Addr string }
	json.Unmarshal([]byte(line), &listening)
	code, body := get(t, "http://"+listening.Addr+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, `idn_registry_queue_depth{state="due"}`) {
		t.Errorf("/metrics (%d) lacks the registry queue:\n%s", code, body)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}

	vars["BLOCKCHAIN_NETWORK"] = "mainnet"
	stderr.Reset()
	if code := run(context.Background(), nil, env(vars), &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "serves chain 84532, not the configured chain 8453") {
		t.Fatalf("serve against the wrong chain: exit %d: %s", code, stderr.String())
	}
}
