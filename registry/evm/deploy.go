package evm

import (
	"context"
	"math/big"

	"github.com/ethereum/go-ethereum/common"

	"github.com/idnhq/idn/registry/evm/internal/idnregistry"
)

// Deploy deploys the IDNRegistry contract from the relayer key's account,
// which becomes both the contract's owner and its relayer, waits for the
// receipt and returns the contract's address and the transaction hash.
// c.Contract is ignored.
func Deploy(ctx context.Context, c Config) (addr common.Address, txHash string, err error) {
	b, err := connect(ctx, c)
	if err != nil {
		return addr, "", err
	}
	defer b.Close()
	code := append(common.FromHex(idnregistry.IDNRegistryMetaData.Bin), b.binding.PackConstructor(b.from)...)
	r, err := b.transact(ctx, "deploy", common.Hash{}, nil, code)
	if err != nil {
		return addr, "", err
	}
	return r.ContractAddress, r.TxHash.Hex(), nil
}

// Status is what Inspect reads from the chain.
type Status struct {
	ChainID uint64
	Block   uint64
	Relayer common.Address // the relayer key's address
	Balance *big.Int       // the relayer's balance, in wei
	Nonce   uint64         // the relayer's next nonce, pending transactions included

	// Read only when Config.Contract is set.
	Contract        common.Address
	Deployed        bool           // a contract answers at Contract
	ContractOwner   common.Address // may appoint the relayer
	ContractRelayer common.Address // the only account allowed to write
}

// BalanceEther is the relayer's balance in ether, as a decimal.
func (s Status) BalanceEther() string { return weiToEther(s.Balance) }

// Inspect connects as New does (chain id checked) and reads the status
// of the relayer and, when c.Contract is set, of the contract.
func Inspect(ctx context.Context, c Config) (Status, error) {
	b, err := connect(ctx, c)
	if err != nil {
		return Status{}, err
	}
	defer b.Close()
	s := Status{ChainID: c.ChainID, Relayer: b.from, Contract: c.Contract}
	head, err := b.client.HeaderByNumber(ctx, nil)
	if err != nil {
		return s, b.classify("getBlock", err)
	}
	s.Block = head.Number.Uint64()
	if s.Balance, err = b.client.BalanceAt(ctx, b.from, nil); err != nil {
		return s, b.classify("getBalance", err)
	}
	if s.Nonce, err = b.client.PendingNonceAt(ctx, b.from); err != nil {
		return s, b.classify("getTransactionCount", err)
	}
	if c.Contract == (common.Address{}) {
		return s, nil
	}
	code, err := b.client.CodeAt(ctx, c.Contract, nil)
	if err != nil {
		return s, b.classify("getCode", err)
	}
	if s.Deployed = len(code) > 0; !s.Deployed {
		return s, nil
	}
	if s.ContractOwner, err = call(ctx, b, b.binding.PackOwner(), b.binding.UnpackOwner); err != nil {
		return s, b.classify("owner", err)
	}
	if s.ContractRelayer, err = call(ctx, b, b.binding.PackRelayer(), b.binding.UnpackRelayer); err != nil {
		return s, b.classify("relayer", err)
	}
	return s, nil
}
