package evm_test

import (
	"context"
	"crypto/ecdsa"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/idnhq/idn/registry/evm"
	"github.com/idnhq/idn/registry/evm/evmtest"
	"github.com/idnhq/idn/registry/evm/internal/idnregistry"
)

// simChainID is the chain id of go-ethereum's simulated chain.
const simChainID = evmtest.ChainID

var binding = idnregistry.NewIDNRegistry()

// chain is the simulated chain of evmtest with the helpers of these tests.
type chain struct {
	*evmtest.Chain
	t testing.TB
}

func newChain(t testing.TB) *chain { return &chain{Chain: evmtest.New(t), t: t} }

// config is a backend configuration for this chain with the relayer key.
func (c *chain) config(contract common.Address) evm.Config {
	return evm.Config{RPCURL: c.URL, ChainID: simChainID, Contract: contract, Key: c.Relayer,
		PollInterval: 5 * time.Millisecond, ReceiptTimeout: 20 * time.Second}
}

// deploy deploys the registry with the relayer key.
func (c *chain) deploy() common.Address {
	c.t.Helper()
	addr, _, err := evm.Deploy(context.Background(), c.config(common.Address{}))
	if err != nil {
		c.t.Fatal(err)
	}
	return addr
}

// backend returns a Backend for the deployed contract.
func (c *chain) backend(contract common.Address) *evm.Backend {
	c.t.Helper()
	b, err := evm.New(context.Background(), c.config(contract))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(b.Close)
	return b
}

// nonce is the relayer's count of mined transactions.
func (c *chain) nonce() uint64 {
	c.t.Helper()
	n, err := c.Sim.Client().NonceAt(context.Background(), crypto.PubkeyToAddress(c.Relayer.PublicKey), nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

// events returns the logs of the contract's event name, optionally with
// the given first indexed topic.
func (c *chain) events(contract common.Address, name string, first ...common.Hash) []types.Log {
	c.t.Helper()
	topics := [][]common.Hash{{binding.GetABI().Events[name].ID}}
	if len(first) > 0 {
		topics = append(topics, first)
	}
	logs, err := c.Sim.Client().FilterLogs(context.Background(), ethereum.FilterQuery{
		FromBlock: big.NewInt(0), Addresses: []common.Address{contract}, Topics: topics})
	if err != nil {
		c.t.Fatal(err)
	}
	return logs
}

// asOwner sends a contract call signed by the relayer key as the
// contract's owner (setRelayer and the like), and waits for it.
func (c *chain) asOwner(contract common.Address, data []byte) {
	c.t.Helper()
	c.transactAs(c.Relayer, contract, data)
}

func (c *chain) transactAs(key *ecdsa.PrivateKey, contract common.Address, data []byte) *types.Receipt {
	c.t.Helper()
	client := c.Sim.Client()
	opts := bind.NewKeyedTransactor(key, big.NewInt(simChainID))
	tx, err := binding.Instance(client, contract).RawTransact(opts, data)
	if err != nil {
		c.t.Fatal(err)
	}
	c.Kick()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := bind.WaitMined(ctx, client, tx.Hash())
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
