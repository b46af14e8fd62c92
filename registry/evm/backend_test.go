package evm_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/registry/evm"
)

var _ controlplane.Registry = (*evm.Backend)(nil)

// TestDirectWrites: deploy, register a namespace, approve and revoke a
// tuple directly; every repeat finds the write on chain and returns its
// hash without sending another transaction.
func TestDirectWrites(t *testing.T) {
	c := newChain(t)
	contract := c.deploy()
	b := c.backend(contract)
	ctx := context.Background()
	if b.Relayer() != crypto.PubkeyToAddress(c.Relayer.PublicKey) || b.Contract() != contract {
		t.Fatalf("relayer %s, contract %s", b.Relayer(), b.Contract())
	}

	reg, err := b.RegisterNamespace(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.RegisterNamespace(ctx, "acme")
	if err != nil || again != reg {
		t.Fatalf("repeated registration: %s, %v; want %s", again, err, reg)
	}
	if ev := c.events(contract, "NamespaceRegistered"); len(ev) != 1 || ev[0].TxHash.Hex() != reg {
		t.Fatalf("NamespaceRegistered logs: %v", ev)
	}

	const ns, pub, svc = "acme", "ed25519:AAAA", "github"
	if ok, err := b.IsAuthorized(ctx, ns, pub, svc); err != nil || ok {
		t.Fatalf("authorised before approval: %v %v", ok, err)
	}
	approved, err := b.ApproveClaimDirect(ctx, ns, pub, svc)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.IsAuthorized(ctx, ns, pub, svc); !ok {
		t.Fatal("not authorised after approveClaimDirect")
	}
	nonce := c.nonce()
	if again, err := b.ApproveClaimDirect(ctx, ns, pub, svc); err != nil || again != approved {
		t.Fatalf("repeated approval: %s, %v; want %s", again, err, approved)
	}
	revoked, err := b.RevokeClaimDirect(ctx, ns, pub, svc)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.IsAuthorized(ctx, ns, pub, svc); ok {
		t.Fatal("authorised after revokeClaimDirect")
	}
	if again, err := b.RevokeClaimDirect(ctx, ns, pub, svc); err != nil || again != revoked {
		t.Fatalf("repeated revocation: %s, %v; want %s", again, err, revoked)
	}
	if never, err := b.RevokeClaimDirect(ctx, ns, "ed25519:BBBB", svc); err != nil || never != "" {
		t.Fatalf("revocation of a tuple never authorised: %q, %v", never, err)
	}
	if got := c.nonce(); got != nonce+1 {
		t.Fatalf("relayer sent %d transactions for one revocation and three repeats", got-nonce)
	}
	key := evm.TupleKey(ns, pub, svc)
	if ev := c.events(contract, "ClaimApprovedDirect", key); len(ev) != 1 || ev[0].TxHash.Hex() != approved {
		t.Fatalf("ClaimApprovedDirect logs: %v", ev)
	}
	if ev := c.events(contract, "ClaimRevokedDirect", key); len(ev) != 1 || ev[0].TxHash.Hex() != revoked {
		t.Fatalf("ClaimRevokedDirect logs: %v", ev)
	}

	// The key the contract computes is TupleKey.
	out, err := c.Sim.Client().CallContract(ctx, callMsg(contract, binding.PackTupleKey(ns, pub, svc)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := binding.UnpackTupleKey(out); common.Hash(k) != key {
		t.Fatalf("contract tuple key %x, TupleKey %s", k, key)
	}
}

// TestTwoStepClaims: submit, approve and revoke by on-chain claim id; a
// move the claim's state forbids is a revert with its decoded reason.
func TestTwoStepClaims(t *testing.T) {
	c := newChain(t)
	contract := c.deploy()
	b := c.backend(contract)
	ctx := context.Background()
	id, _, err := b.SubmitClaim(ctx, "acme", "ed25519:CCCC", "github")
	if err != nil || id != "1" {
		t.Fatalf("submitClaim: %q, %v", id, err)
	}
	if _, err := b.ApproveClaim(ctx, id); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.IsAuthorized(ctx, "acme", "ed25519:CCCC", "github"); !ok {
		t.Fatal("not authorised after approveClaim")
	}
	_, err = b.RejectClaim(ctx, id)
	var we *evm.WriteError
	if !errors.As(err, &we) || we.Reason != evm.ReasonReverted || we.Detail != "InvalidClaimState(1, 2)" {
		t.Fatalf("reject of an approved claim: %v", err)
	}
	if _, err := b.RevokeClaim(ctx, id); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.IsAuthorized(ctx, "acme", "ed25519:CCCC", "github"); ok {
		t.Fatal("authorised after revokeClaim")
	}
	if _, err := b.ApproveClaim(ctx, "7"); !errors.As(err, &we) || we.Detail != "ClaimNotFound(7)" {
		t.Fatalf("approval of an unknown claim: %v", err)
	}
	if _, err := b.RegisterNamespace(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	newOwner := crypto.PubkeyToAddress(c.Other.PublicKey).Hex()
	if _, err := b.TransferNamespace(ctx, "acme", newOwner); err != nil {
		t.Fatal(err)
	}
	if ev := c.events(contract, "NamespaceTransferred"); len(ev) != 1 {
		t.Fatalf("NamespaceTransferred logs: %v", ev)
	}
}

// TestStartChecks: New refuses an endpoint on another chain, an address
// without a contract, and a configuration without a key.
func TestStartChecks(t *testing.T) {
	c := newChain(t)
	contract := c.deploy()
	ctx := context.Background()
	// The registry as it was when its writes took the agent's address.
	old, err := os.ReadFile("testdata/IDNRegistry-agentip.bin")
	if err != nil {
		t.Fatal(err)
	}
	opts := bind.NewKeyedTransactor(c.Relayer, big.NewInt(simChainID))
	other, _, err := bind.DeployContract(opts, common.FromHex(strings.TrimSpace(string(old))), c.Sim.Client(),
		binding.PackConstructor(crypto.PubkeyToAddress(c.Relayer.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	c.Kick()
	eventually(t, 10*time.Second, "the other contract mined", func() bool {
		code, err := c.Sim.Client().CodeAt(ctx, other, nil)
		return err == nil && len(code) > 0
	})
	for _, tc := range []struct {
		name string
		mod  func(*evm.Config)
		want string
	}{
		{"mainnet configured, testnet chain", func(cfg *evm.Config) { cfg.ChainID = evm.ChainIDBase }, "serves chain 1337, not the configured chain 8453"},
		{"no contract at the address", func(cfg *evm.Config) {
			cfg.Contract = common.HexToAddress("0x00000000000000000000000000000000000000aa")
		}, "no contract at"},
		{"a contract of another version", func(cfg *evm.Config) { cfg.Contract = other },
			"has no approveClaimDirect(string,string,string) of this IDNRegistry version"},
		{"no key", func(cfg *evm.Config) { cfg.Key = nil }, "relayer key"},
		{"no address", func(cfg *evm.Config) { cfg.Contract = common.Address{} }, "registry address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := c.config(contract)
			tc.mod(&cfg)
			_, err := evm.New(ctx, cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRevertReason: a write the contract refuses fails with the decoded
// custom error, here after the owner appointed another relayer.
func TestRevertReason(t *testing.T) {
	c := newChain(t)
	contract := c.deploy()
	b := c.backend(contract)
	other := crypto.PubkeyToAddress(c.Other.PublicKey)
	c.asOwner(contract, binding.PackSetRelayer(other))
	_, err := b.ApproveClaimDirect(context.Background(), "acme", "ed25519:DDDD", "github")
	var we *evm.WriteError
	if !errors.As(err, &we) || we.Reason != evm.ReasonReverted || we.Detail != fmt.Sprintf("NotRelayer(%s)", b.Relayer().Hex()) {
		t.Fatalf("write by a replaced relayer: %v", err)
	}
	if got := metric(t, b, "idn_registry_write_failures_total", "op", "approveClaimDirect", "reason", evm.ReasonReverted); got != 1 {
		t.Fatalf("failure metric = %v", got)
	}
}

// metric reads one sample of the backend's collectors by name and label
// pairs.
func metric(t testing.TB, b *evm.Backend, name string, labels ...string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(b.Collectors()...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func callMsg(to common.Address, data []byte) ethereum.CallMsg {
	return ethereum.CallMsg{To: &to, Data: data}
}

// TestRPCURLNeverInErrors: provider URLs carry API keys; no error of an
// unreachable or failing endpoint repeats them.
func TestRPCURLNeverInErrors(t *testing.T) {
	c := newChain(t)
	contract := c.deploy()
	cfg := c.config(contract)
	cfg.RPCURL = c.URL + "/v2/sekrit-provider-key"
	b, err := evm.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c.SetDown(true)
	_, err = b.ApproveClaimDirect(context.Background(), "acme", "ed25519:EEEE", "github")
	var we *evm.WriteError
	if !errors.As(err, &we) || we.Reason != evm.ReasonRPC || strings.Contains(err.Error(), "sekrit") {
		t.Fatalf("write to a down endpoint: %v", err)
	}
	if _, err := evm.New(context.Background(), cfg); err == nil || strings.Contains(err.Error(), "sekrit") {
		t.Fatalf("start against a down endpoint: %v", err)
	}
	cfg.RPCURL = "http://127.0.0.1:1/v2/sekrit-provider-key" // nothing listens
	if _, err := evm.New(context.Background(), cfg); err == nil || strings.Contains(err.Error(), "sekrit") {
		t.Fatalf("start against a closed port: %v", err)
	}
}

// TestConcurrentWritersShareKey: two backends (two control-plane
// instances) write concurrently with one relayer key; nonce conflicts are
// resolved by reading the nonce again, and every write lands once.
func TestConcurrentWritersShareKey(t *testing.T) {
	c := newChain(t)
	contract := c.deploy()
	backends := []*evm.Backend{c.backend(contract), c.backend(contract)}
	start := c.nonce()
	const n = 30
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := backends[i%2].ApproveClaimDirect(context.Background(), "acme", fmt.Sprintf("ed25519:K%d", i), "github")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		key := evm.TupleKey("acme", fmt.Sprintf("ed25519:K%d", i), "github")
		if ev := c.events(contract, "ClaimApprovedDirect", key); len(ev) != 1 {
			t.Fatalf("tuple %d has %d approval logs", i, len(ev))
		}
	}
	if got := c.nonce() - start; got != n {
		t.Fatalf("relayer sent %d transactions for %d writes", got, n)
	}
}

// TestReceiptTimeoutThenRepeat: a write whose receipt does not come in
// time fails with its hash; repeating it waits for that transaction and
// returns its hash instead of sending a second one.
func TestReceiptTimeoutThenRepeat(t *testing.T) {
	c := newChain(t)
	contract := c.deploy()
	cfg := c.config(contract)
	cfg.ReceiptTimeout = 200 * time.Millisecond
	b, err := evm.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start := c.nonce()
	c.Pause()
	_, err = b.ApproveClaimDirect(context.Background(), "acme", "ed25519:FFFF", "github")
	var we *evm.WriteError
	if !errors.As(err, &we) || we.Reason != evm.ReasonReceiptTimeout || we.TxHash == "" {
		t.Fatalf("write without a block: %v", err)
	}
	c.Resume()
	hash, err := b.ApproveClaimDirect(context.Background(), "acme", "ed25519:FFFF", "github")
	if err != nil || hash != we.TxHash {
		t.Fatalf("repeat: %s, %v; want the first transaction %s", hash, err, we.TxHash)
	}
	if got := c.nonce() - start; got != 1 {
		t.Fatalf("relayer sent %d transactions", got)
	}
}

// TestWritesAreReadBack: behind a node whose head lags its receipts (as
// one behind a load balancer may), a write returns only once a read of
// the latest block sees it.
func TestWritesAreReadBack(t *testing.T) {
	c := newChain(t)
	contract := c.deploy()
	cfg := c.config(contract)
	rpc, err := ethclient.Dial(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer rpc.Close()
	ctx := context.Background()
	head, err := rpc.HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The deployment's block is old news; the writes' blocks are new.
	cfg.Client = &laggingNode{Client: rpc, newest: head.Number}
	b, err := evm.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, svc := range []string{"github", "slack", "linear"} {
		id, _, err := b.SubmitClaim(ctx, "acme", "ed25519:EEEE", svc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.ApproveClaim(ctx, id); err != nil {
			t.Fatal(err)
		}
		if ok, err := b.IsAuthorized(ctx, "acme", "ed25519:EEEE", svc); !ok || err != nil {
			t.Fatalf("%s approved but not read back: %v", svc, err)
		}
	}
}

// laggingNode reads the latest block as the one before it for the first
// two reads after a new block.
type laggingNode struct {
	evm.Client
	mu     sync.Mutex
	newest *big.Int
	behind int
}

func (n *laggingNode) latest(ctx context.Context) (*big.Int, error) {
	h, err := n.Client.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.newest == nil || h.Number.Cmp(n.newest) > 0 {
		n.newest, n.behind = h.Number, 2
	}
	if n.behind > 0 && h.Number.Sign() > 0 {
		n.behind--
		return new(big.Int).Sub(h.Number, big.NewInt(1)), nil
	}
	return h.Number, nil
}

func (n *laggingNode) HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error) {
	if number == nil {
		var err error
		if number, err = n.latest(ctx); err != nil {
			return nil, err
		}
	}
	return n.Client.HeaderByNumber(ctx, number)
}

func (n *laggingNode) CallContract(ctx context.Context, msg ethereum.CallMsg, number *big.Int) ([]byte, error) {
	if number == nil {
		var err error
		if number, err = n.latest(ctx); err != nil {
			return nil, err
		}
	}
	return n.Client.CallContract(ctx, msg, number)
}

// TestDeployAndInspect: Inspect reports the chain, the relayer's balance
// and the contract's owner and relayer.
func TestDeployAndInspect(t *testing.T) {
	c := newChain(t)
	before, err := evm.Inspect(context.Background(), c.config(common.Address{}))
	if err != nil || before.Deployed || before.ChainID != simChainID || before.BalanceEther() != "1000" {
		t.Fatalf("before deploy: %+v (%s ether), %v", before, before.BalanceEther(), err)
	}
	contract := c.deploy()
	relayer := crypto.PubkeyToAddress(c.Relayer.PublicKey)
	// The simulated node can serve the deployment's receipt a moment
	// before its head block moves on (a CI run read head block 0, then
	// found the code), as nodes behind a load balancer can: the block
	// number is waited for.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s, err := evm.Inspect(context.Background(), c.config(contract))
		if err != nil || !s.Deployed || s.ContractRelayer != relayer || s.ContractOwner != relayer || s.Nonce != 1 {
			t.Fatalf("after deploy: %+v, %v", s, err)
		}
		if s.Block > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after deploy, the head block is still %d", s.Block)
		}
	}
}
