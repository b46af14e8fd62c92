package evm

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/idnhq/idn/registry/evm/internal/idnregistry"
)

// Client is the part of an Ethereum JSON-RPC client the backend uses.
// *ethclient.Client has it, and so has go-ethereum's simulated chain.
type Client interface {
	ChainID(ctx context.Context) (*big.Int, error)
	PendingNonceAt(ctx context.Context, account common.Address) (uint64, error)
	EstimateGas(ctx context.Context, msg ethereum.CallMsg) (uint64, error)
	SuggestGasTipCap(ctx context.Context) (*big.Int, error)
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
	SendTransaction(ctx context.Context, tx *types.Transaction) error
	TransactionReceipt(ctx context.Context, txHash common.Hash) (*types.Receipt, error)
	CallContract(ctx context.Context, msg ethereum.CallMsg, blockNumber *big.Int) ([]byte, error)
	FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error)
	BalanceAt(ctx context.Context, account common.Address, blockNumber *big.Int) (*big.Int, error)
	CodeAt(ctx context.Context, account common.Address, blockNumber *big.Int) ([]byte, error)
}

// Config configures a Backend.
type Config struct {
	// RPCURL is the chain's JSON-RPC endpoint (BLOCKCHAIN_RPC_URL), dialled
	// when Client is nil. It never appears in errors: providers put API
	// keys in it.
	RPCURL string
	// Client, when set, is used instead of dialling RPCURL (go-ethereum's
	// simulated chain in tests, or a client shared with other code).
	Client Client
	// ChainID is the chain the endpoint must serve (LookupNetwork gives it
	// for BLOCKCHAIN_NETWORK); an endpoint on another chain is refused.
	// Required.
	ChainID uint64
	// Contract is the IDNRegistry's address (IDN_REGISTRY_ADDRESS).
	// Required by New; Deploy ignores it and Inspect reads it when set.
	Contract common.Address
	// Key is the relayer's key (RELAYER_PRIVATE_KEY): it signs and pays
	// for every write. Required.
	Key *ecdsa.PrivateKey
	// ReceiptTimeout bounds the wait for a write's receipt; zero means 60 s.
	ReceiptTimeout time.Duration
	// PollInterval is the pause between receipt polls; zero means 1 s.
	PollInterval time.Duration
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
}

// Backend writes to an IDNRegistry contract. It implements the control
// plane's Registry interface; its methods are safe for concurrent use.
type Backend struct {
	cfg     Config
	client  Client
	closer  func() // closes a client the backend dialled
	abi     *abi.ABI
	binding *idnregistry.IDNRegistry
	from    common.Address
	signer  types.Signer
	log     *slog.Logger
	metrics *metrics

	// sendMu orders nonce assignment and sending; the receipt wait happens
	// outside it, so writes overlap.
	sendMu     sync.Mutex
	nonce      uint64
	nonceKnown bool

	targets keyedMutex // one write at a time per tuple or namespace

	inflightMu sync.Mutex
	inflight   map[common.Hash]common.Hash // target → sent transaction whose receipt was not seen
}

// New connects to the chain and returns a Backend after checking that
// the endpoint serves c.ChainID and that a contract answers at
// c.Contract. A relayer key that is not the contract's relayer is logged,
// not refused: its writes revert (NotRelayer) until the contract's owner
// appoints it. Close releases the connection.
func New(ctx context.Context, c Config) (*Backend, error) {
	b, err := connect(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := b.checkContract(ctx); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// connect validates c, dials RPCURL when there is no Client, and checks
// the chain id.
func connect(ctx context.Context, c Config) (*Backend, error) {
	if c.Key == nil {
		return nil, errors.New("evm: Config.Key (the relayer key) is required")
	}
	if c.ChainID == 0 {
		return nil, errors.New("evm: Config.ChainID is required")
	}
	if c.ReceiptTimeout <= 0 {
		c.ReceiptTimeout = 60 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	binding := idnregistry.NewIDNRegistry()
	parsed := binding.GetABI()
	b := &Backend{cfg: c, client: c.Client, abi: &parsed, binding: binding,
		from: crypto.PubkeyToAddress(c.Key.PublicKey), log: c.Logger, metrics: newMetrics(),
		signer: types.LatestSignerForChainID(new(big.Int).SetUint64(c.ChainID)), inflight: map[common.Hash]common.Hash{}}
	if b.client == nil {
		if c.RPCURL == "" {
			return nil, errors.New("evm: Config.RPCURL or Config.Client is required")
		}
		rc, err := rpc.DialContext(ctx, c.RPCURL)
		if err != nil {
			return nil, errors.New("evm: the RPC URL is not a valid http(s), ws(s) or IPC endpoint")
		}
		ec := ethclient.NewClient(rc)
		b.client, b.closer = ec, ec.Close
	}
	id, err := b.client.ChainID(ctx)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("evm: read the chain id: %w", b.classify("chainId", err))
	}
	if !id.IsUint64() || id.Uint64() != c.ChainID {
		b.Close()
		return nil, fmt.Errorf("evm: the RPC endpoint serves chain %s, not the configured chain %d", id, c.ChainID)
	}
	return b, nil
}

func (b *Backend) checkContract(ctx context.Context) error {
	if b.cfg.Contract == (common.Address{}) {
		return errors.New("evm: Config.Contract (the registry address) is required")
	}
	code, err := b.client.CodeAt(ctx, b.cfg.Contract, nil)
	if err != nil {
		return fmt.Errorf("evm: read the registry contract: %w", b.classify("getCode", err))
	}
	if len(code) == 0 {
		return fmt.Errorf("evm: no contract at %s on chain %d", b.cfg.Contract.Hex(), b.cfg.ChainID)
	}
	// The dispatcher of a contract holds the selector of every function it
	// has: a registry of another version (one whose writes took the
	// agent's address) would revert every write.
	for _, m := range []string{"registerNamespace", "approveClaimDirect", "revokeClaimDirect"} {
		if !bytes.Contains(code, b.binding.GetABI().Methods[m].ID) {
			return fmt.Errorf("evm: the contract at %s has no %s of this IDNRegistry version: deploy the current one (controlplane registry deploy)",
				b.cfg.Contract.Hex(), b.binding.GetABI().Methods[m].Sig)
		}
	}
	relayer, err := call(ctx, b, b.binding.PackRelayer(), b.binding.UnpackRelayer)
	if err != nil {
		return fmt.Errorf("evm: %s is not an IDNRegistry: %w", b.cfg.Contract.Hex(), b.classify("relayer", err))
	}
	if relayer != b.from {
		b.log.WarnContext(ctx, "the relayer key is not the registry's relayer: writes will revert",
			"relayer", b.from.Hex(), "registry_relayer", relayer.Hex())
	}
	return nil
}

// Close releases the connection the Backend dialled; a Client given in
// Config stays open.
func (b *Backend) Close() {
	if b.closer != nil {
		b.closer()
	}
}

// Relayer is the address of the relayer key.
func (b *Backend) Relayer() common.Address { return b.from }

// Contract is the registry's address.
func (b *Backend) Contract() common.Address { return b.cfg.Contract }

// call runs a view function at the latest block.
func call[T any](ctx context.Context, b *Backend, data []byte, unpack func([]byte) (T, error)) (T, error) {
	var zero T
	out, err := b.client.CallContract(ctx, ethereum.CallMsg{From: b.from, To: &b.cfg.Contract, Data: data}, nil)
	if err != nil {
		return zero, err
	}
	return unpack(out)
}

// TupleKey is the contract's key of a (namespace, public key, service)
// tuple: keccak256(abi.encode(namespace, publicKey, service)).
func TupleKey(namespace, publicKey, service string) common.Hash {
	str, _ := abi.NewType("string", "", nil)
	enc, err := abi.Arguments{{Type: str}, {Type: str}, {Type: str}}.Pack(namespace, publicKey, service)
	if err != nil {
		panic(err) // strings always encode
	}
	return crypto.Keccak256Hash(enc)
}

// transact sends a transaction to the contract (to nil: a contract
// creation), waits for its receipt and returns it; a reverted transaction
// is a *WriteError with the decoded reason. target names what the write
// changes, so that a later write of the same target first waits for a
// transaction whose receipt this one did not see.
func (b *Backend) transact(ctx context.Context, op string, target common.Hash, to *common.Address, data []byte) (*types.Receipt, error) {
	start := time.Now()
	r, err := b.sendAndWait(ctx, op, target, to, data)
	b.metrics.observe(op, time.Since(start), err)
	if err != nil {
		b.log.WarnContext(ctx, "registry write failed", "op", op, "err", err)
	}
	return r, err
}

func (b *Backend) sendAndWait(ctx context.Context, op string, target common.Hash, to *common.Address, data []byte) (*types.Receipt, error) {
	msg := ethereum.CallMsg{From: b.from, To: to, Data: data}
	gas, err := b.client.EstimateGas(ctx, msg)
	if err != nil {
		return nil, b.classify(op, err)
	}
	gas += gas / 5 // state may change between estimate and inclusion
	tip, err := b.client.SuggestGasTipCap(ctx)
	if err != nil {
		return nil, b.classify(op, err)
	}
	head, err := b.client.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, b.classify(op, err)
	}
	feeCap := new(big.Int).Add(tip, tip)
	if head.BaseFee != nil { // room for the base fee to double before inclusion
		feeCap.Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(2)))
	}
	tx, err := b.signAndSend(ctx, &types.DynamicFeeTx{GasTipCap: tip, GasFeeCap: feeCap, Gas: gas, To: to, Data: data})
	if err != nil {
		if isNonceError(err) {
			return nil, &WriteError{Op: op, Reason: ReasonNonce, Detail: b.redact(err.Error())}
		}
		return nil, b.classify(op, err)
	}
	r, err := b.waitReceipt(ctx, op, tx.Hash())
	if err != nil {
		// The transaction may never be mined (a nonce gap): count from the
		// node's pending state again.
		b.sendMu.Lock()
		b.nonceKnown = false
		b.sendMu.Unlock()
		b.inflightMu.Lock()
		b.inflight[target] = tx.Hash()
		b.inflightMu.Unlock()
		return nil, err
	}
	if r.Status != types.ReceiptStatusSuccessful {
		reason := "without reason"
		msg.Gas = tx.Gas()
		if _, cerr := b.client.CallContract(ctx, msg, r.BlockNumber); cerr != nil {
			data, _ := revertData(cerr)
			reason = revertReason(b.abi, data)
		}
		return nil, &WriteError{Op: op, Reason: ReasonReverted, Detail: reason, TxHash: tx.Hash().Hex()}
	}
	return r, nil
}

// nonceAttempts bounds the sends of one write refused for their nonce.
// Every refusal is a nonce another instance used meanwhile, so a burst of
// writes from the others costs one attempt each: 10 ran out when two
// instances sent 15 writes each at once on a loaded machine.
const nonceAttempts = 64

// signAndSend gives tx the relayer's next nonce, signs and sends it. The
// nonce is counted here, and read from the node (pending state) at the
// first send and after a failed one, since the node may or may not have
// kept it. Another instance sharing the key may take a nonce first: the
// node then refuses ours, and the next try uses the node's pending count
// or the following nonce, whichever is higher, so every refusal is a
// nonce someone else used.
func (b *Backend) signAndSend(ctx context.Context, tx *types.DynamicFeeTx) (*types.Transaction, error) {
	b.sendMu.Lock()
	defer b.sendMu.Unlock()
	for attempt := 1; ; attempt++ {
		if !b.nonceKnown {
			n, err := b.client.PendingNonceAt(ctx, b.from)
			if err != nil {
				return nil, err
			}
			b.nonce, b.nonceKnown = n, true
		}
		tx.ChainID, tx.Nonce = new(big.Int).SetUint64(b.cfg.ChainID), b.nonce
		signed, err := types.SignNewTx(b.cfg.Key, b.signer, tx)
		if err != nil {
			return nil, err
		}
		err = b.client.SendTransaction(ctx, signed)
		if err == nil {
			b.nonce++
			return signed, nil
		}
		if !isNonceError(err) || attempt == nonceAttempts {
			b.nonceKnown = false
			return nil, err
		}
		b.metrics.nonceResyncs.Inc()
		pending, perr := b.client.PendingNonceAt(ctx, b.from)
		if perr != nil {
			b.nonceKnown = false
			return nil, perr
		}
		b.nonce = max(pending, b.nonce+1)
	}
}

// waitReceipt polls for the receipt of hash, and for a head that holds
// its block, until ReceiptTimeout. RPC errors are retried at the next
// poll: the node may come back.
func (b *Backend) waitReceipt(ctx context.Context, op string, hash common.Hash) (*types.Receipt, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ReceiptTimeout)
	defer cancel()
	t := time.NewTicker(b.cfg.PollInterval)
	defer t.Stop()
	for {
		// A node may give a block's receipts before its head is that
		// block: a write returns once what is read next sees it.
		if r, err := b.client.TransactionReceipt(ctx, hash); err == nil {
			if head, err := b.client.HeaderByNumber(ctx, nil); err == nil && head.Number.Cmp(r.BlockNumber) >= 0 {
				return r, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, &WriteError{Op: op, Reason: ReasonReceiptTimeout,
				Detail: fmt.Sprintf("no receipt within %s", b.cfg.ReceiptTimeout), TxHash: hash.Hex()}
		case <-t.C:
		}
	}
}

// settle waits for the receipt of an earlier transaction for target whose
// receipt was not seen, so that the on-chain check that follows sees it.
func (b *Backend) settle(ctx context.Context, op string, target common.Hash) error {
	b.inflightMu.Lock()
	hash, ok := b.inflight[target]
	b.inflightMu.Unlock()
	if !ok {
		return nil
	}
	if _, err := b.waitReceipt(ctx, op, hash); err != nil {
		var we *WriteError
		if errors.As(err, &we) {
			we.Detail = "an earlier transaction for this write is still pending"
		}
		return err
	}
	b.inflightMu.Lock()
	delete(b.inflight, target)
	b.inflightMu.Unlock()
	return nil
}

// changeTx finds the transaction that made the last change of target: the
// log of one of events at block, whose first topic after the event's is
// target.
func (b *Backend) changeTx(ctx context.Context, op string, block uint64, target common.Hash, events ...string) (string, error) {
	ids := make([]common.Hash, len(events))
	for i, name := range events {
		ids[i] = b.abi.Events[name].ID
	}
	n := new(big.Int).SetUint64(block)
	logs, err := b.client.FilterLogs(ctx, ethereum.FilterQuery{FromBlock: n, ToBlock: n,
		Addresses: []common.Address{b.cfg.Contract}, Topics: [][]common.Hash{ids, {target}}})
	if err != nil {
		return "", b.classify(op, err)
	}
	if len(logs) == 0 {
		return "", &WriteError{Op: op, Reason: ReasonRPC,
			Detail: fmt.Sprintf("the registry changed at block %d but the node returned no %s log", block, strings.Join(events, "/"))}
	}
	b.metrics.writes.WithLabelValues(op, "already_on_chain").Inc()
	return logs[len(logs)-1].TxHash.Hex(), nil
}

// keyedMutex is a mutex per key, dropped when unused.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[common.Hash]*keyLock
}

type keyLock struct {
	sync.Mutex
	users int
}

func (k *keyedMutex) lock(key common.Hash) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[common.Hash]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
