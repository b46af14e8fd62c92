// Package evmtest serves go-ethereum's simulated chain over HTTP JSON-RPC,
// as a node serves it, so tests of registry writes run the real client
// without a network. It mines a block whenever a transaction arrives
// (unless paused), and a test can take the endpoint down or hold the
// answers to sends.
package evmtest

import (
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

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/rpc"
)

// ChainID is the chain id of go-ethereum's simulated chain.
const ChainID = 1337

// Chain is a simulated chain behind an HTTP JSON-RPC endpoint.
type Chain struct {
	URL     string             // the JSON-RPC endpoint
	Sim     *simulated.Backend // the chain itself, for direct reads
	Relayer *ecdsa.PrivateKey  // a funded account (1000 ether)
	Other   *ecdsa.PrivateKey  // another funded account

	rc     *rpc.Client
	down   atomic.Bool
	paused atomic.Bool
	sent   atomic.Int64
	mine   chan struct{}

	mu   sync.Mutex
	hold chan struct{} // when set, answers to sends wait until it closes
}

// New starts a chain with ChainID; it stops at the test's cleanup.
func New(t testing.TB) *Chain { return NewWithChainID(t, ChainID) }

// NewWithChainID starts a chain that calls itself chainID, e.g. Base
// Sepolia's, so that a program configured for that network accepts it.
func NewWithChainID(t testing.TB, chainID uint64) *Chain {
	t.Helper()
	relayer, _ := crypto.GenerateKey()
	other, _ := crypto.GenerateKey()
	funds, _ := new(big.Int).SetString("1000000000000000000000", 10)
	sim := simulated.NewBackend(types.GenesisAlloc{
		crypto.PubkeyToAddress(relayer.PublicKey): {Balance: funds},
		crypto.PubkeyToAddress(other.PublicKey):   {Balance: funds},
	}, func(_ *node.Config, eth *ethconfig.Config) {
		cfg := *eth.Genesis.Config // shared with every simulated chain: copy
		cfg.ChainID = new(big.Int).SetUint64(chainID)
		eth.Genesis.Config, eth.NetworkId = &cfg, chainID
	})
	// The simulated client keeps its RPC client in an exported field of
	// an unexported type; the endpoint forwards requests to it.
	rc := reflect.ValueOf(sim.Client()).FieldByName("Client").Interface().(*ethclient.Client).Client()
	c := &Chain{Sim: sim, rc: rc, Relayer: relayer, Other: other, mine: make(chan struct{}, 1)}
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
		c.Release()
		srv.Close()
		close(c.mine)
		<-done
		sim.Close()
	})
	return c
}

// ServeHTTP answers one JSON-RPC request through the simulated node.
func (c *Chain) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
		c.Kick()
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

// Kick asks for a block.
func (c *Chain) Kick() {
	select {
	case c.mine <- struct{}{}:
	default:
	}
}

// SetDown takes the endpoint down (503 to every request) or back up.
func (c *Chain) SetDown(down bool) { c.down.Store(down) }

// Pause stops mining; Resume mines what is pending and goes on.
func (c *Chain) Pause()  { c.paused.Store(true) }
func (c *Chain) Resume() { c.paused.Store(false); c.Kick() }

// Sent counts the transactions the endpoint accepted.
func (c *Chain) Sent() int64 { return c.sent.Load() }

// HoldSends makes answers to sends wait (the transaction is accepted and
// mined, the sender never hears of it) until Release.
func (c *Chain) HoldSends() {
	c.mu.Lock()
	c.hold = make(chan struct{})
	c.mu.Unlock()
}

// Release answers the held sends.
func (c *Chain) Release() {
	c.mu.Lock()
	if c.hold != nil {
		close(c.hold)
		c.hold = nil
	}
	c.mu.Unlock()
}
