package evm_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/idnhq/idn/registry/evm"
	"github.com/idnhq/idn/registry/evm/internal/idnregistry"
)

// simChainID is the chain id of go-ethereum's simulated chain.
const simChainID = 1337

var binding = idnregistry.NewIDNRegistry()

// chain is go-ethereum's simulated chain served over HTTP JSON-RPC, as a
// node serves it, so the backend runs its real client. It mines a block
// whenever a transaction arrives (unless paused), and the test can take the
// endpoint down or hold the answers to sends.
type chain struct {
	t       testing.TB
	sim     *simulated.Backend
	rc      *rpc.Client
	URL     string
	relayer *ecdsa.PrivateKey // funded; deploys and writes
	other   *ecdsa.PrivateKey // funded; not the relayer

	down   atomic.Bool
	paused atomic.Bool
	sent   atomic.Int64 // transactions accepted
	mine   chan struct{}

	mu   sync.Mutex
	hold chan struct{} // when set, answers to sends wait until it closes
}

func newChain(t testing.TB) *chain {
	t.Helper()
	relayer, _ := crypto.GenerateKey()
	other, _ := crypto.GenerateKey()
	funds, _ := new(big.Int).SetString("1000000000000000000000", 10) // 1000 ether
	sim := simulated.NewBackend(types.GenesisAlloc{
		crypto.PubkeyToAddress(relayer.PublicKey): {Balance: funds},
		crypto.PubkeyToAddress(other.PublicKey):   {Balance: funds},
	})
	// The simulated client hides its RPC client in an exported field of an
	// unexported type; the endpoint forwards requests to it.
	rc := reflect.ValueOf(sim.Client()).FieldByName("Client").Interface().(*ethclient.Client).Client()
	c := &chain{t: t, sim: sim, rc: rc, relayer: relayer, other: other, mine: make(chan struct{}, 1)}
	srv := httptest.NewServer(c)
	c.URL = srv.URL
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range c.mine {
			if !c.paused.Load() {
				sim.Commit()
			}
		}
	}()
	t.Cleanup(func() {
		c.release()
		srv.Close()
		close(c.mine)
		<-done
		sim.Close()
	})
	return c
}

// ServeHTTP answers one JSON-RPC request through the simulated node.
func (c *chain) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.down.Load() {
		http.Error(w, "endpoint down", http.StatusServiceUnavailable)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		ID     json.RawMessage   `json:"id"`
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "single JSON-RPC requests only", http.StatusBadRequest)
		return
	}
	args := make([]any, len(req.Params))
	for i, p := range req.Params {
		args[i] = p
	}
	var result json.RawMessage
	err := c.rc.CallContext(r.Context(), &result, req.Method, args...)
	out := map[string]any{"jsonrpc": "2.0", "id": req.ID}
	if err != nil {
		e := map[string]any{"code": -32000, "message": err.Error()}
		if re, ok := err.(rpc.Error); ok {
			e["code"] = re.ErrorCode()
		}
		if de, ok := err.(rpc.DataError); ok && de.ErrorData() != nil {
			e["data"] = de.ErrorData()
		}
		out["error"] = e
	} else {
		if result == nil {
			result = json.RawMessage("null")
		}
		out["result"] = result
	}
	if req.Method == "eth_sendRawTransaction" && err == nil {
		c.sent.Add(1)
		c.kick()
		c.mu.Lock()
		hold := c.hold
		c.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// kick asks for a block.
func (c *chain) kick() {
	select {
	case c.mine <- struct{}{}:
	default:
	}
}

// pause stops mining; resume mines what is pending and goes on.
func (c *chain) pause()  { c.paused.Store(true) }
func (c *chain) resume() { c.paused.Store(false); c.kick() }

// holdSends makes answers to sends wait (the transaction is accepted and
// mined, the sender never hears of it) until release.
func (c *chain) holdSends() {
	c.mu.Lock()
	c.hold = make(chan struct{})
	c.mu.Unlock()
}

func (c *chain) release() {
	c.mu.Lock()
	if c.hold != nil {
		close(c.hold)
		c.hold = nil
	}
	c.mu.Unlock()
}

// config is a backend configuration for this chain with the relayer key.
func (c *chain) config(contract common.Address) evm.Config {
	return evm.Config{RPCURL: c.URL, ChainID: simChainID, Contract: contract, Key: c.relayer,
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
	n, err := c.sim.Client().NonceAt(context.Background(), crypto.PubkeyToAddress(c.relayer.PublicKey), nil)
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
	logs, err := c.sim.Client().FilterLogs(context.Background(), ethereum.FilterQuery{
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
	c.transactAs(c.relayer, contract, data)
}

func (c *chain) transactAs(key *ecdsa.PrivateKey, contract common.Address, data []byte) *types.Receipt {
	c.t.Helper()
	client := c.sim.Client()
	opts := bind.NewKeyedTransactor(key, big.NewInt(simChainID))
	tx, err := binding.Instance(client, contract).RawTransact(opts, data)
	if err != nil {
		c.t.Fatal(err)
	}
	c.kick()
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
