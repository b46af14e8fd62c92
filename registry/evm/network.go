package evm

import (
	"crypto/ecdsa"
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// Networks of BLOCKCHAIN_NETWORK and their chain ids.
const (
	Mainnet = "mainnet" // Base
	Testnet = "testnet" // Base Sepolia

	ChainIDBase        = 8453
	ChainIDBaseSepolia = 84532
)

// Network describes one BLOCKCHAIN_NETWORK.
type Network struct {
	ChainID uint64
	// RPCURL is the network's public endpoint, used when
	// BLOCKCHAIN_RPC_URL is not set. It is rate-limited: production
	// deployments should set their own.
	RPCURL string
	// Explorer is the base of the network's block explorer; a transaction
	// is at Explorer + "/tx/" + hash.
	Explorer string
}

// LookupNetwork returns the network called name ("mainnet" or "testnet").
func LookupNetwork(name string) (Network, error) {
	switch name {
	case Mainnet:
		return Network{ChainID: ChainIDBase, RPCURL: "https://mainnet.base.org", Explorer: "https://basescan.org"}, nil
	case Testnet:
		return Network{ChainID: ChainIDBaseSepolia, RPCURL: "https://sepolia.base.org", Explorer: "https://sepolia.basescan.org"}, nil
	}
	return Network{}, fmt.Errorf("evm: network %q is not mainnet or testnet", name)
}

// ParseKey parses a secp256k1 private key in hex, with or without 0x
// (RELAYER_PRIVATE_KEY). The error never repeats the input.
func ParseKey(s string) (*ecdsa.PrivateKey, error) {
	k, err := crypto.HexToECDSA(strings.TrimPrefix(strings.TrimSpace(s), "0x"))
	if err != nil {
		return nil, fmt.Errorf("evm: the relayer key must be 32 bytes of hex")
	}
	return k, nil
}

// ParseAddress parses a 0x-prefixed 20-byte hex address
// (IDN_REGISTRY_ADDRESS).
func ParseAddress(s string) (common.Address, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "0x") || !common.IsHexAddress(s) {
		return common.Address{}, fmt.Errorf("evm: %q is not a 0x-prefixed 20-byte hex address", s)
	}
	a := common.HexToAddress(s)
	if a == (common.Address{}) {
		return a, fmt.Errorf("evm: the zero address is not a contract")
	}
	return a, nil
}
