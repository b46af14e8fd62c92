// Package evm writes the control plane's registry to an EVM chain. It
// deploys the IDNRegistry contract (registry/contracts/IDNRegistry.sol)
// and implements controlplane.Registry on it with go-ethereum.
//
// It is the only package of the module that imports go-ethereum. The
// controlplane package depends on its Registry interface alone, so
// programs that keep registry writes disabled never link the chain client.
//
// Everything a write sends is public for ever: a namespace's name, and a
// claim's namespace, public key and service (with their tuple key). No
// address or other detail a service reported about the agent is.
//
// A backend on Base Sepolia, as cmd/controlplane builds one from its
// environment:
//
//	network, _ := evm.LookupNetwork(evm.Testnet)
//	key, err := evm.ParseKey(os.Getenv("RELAYER_PRIVATE_KEY"))
//	...
//	contract, err := evm.ParseAddress(os.Getenv("IDN_REGISTRY_ADDRESS"))
//	...
//	b, err := evm.New(ctx, evm.Config{RPCURL: network.RPCURL, ChainID: network.ChainID, Contract: contract, Key: key})
//	...
//	defer b.Close()
//	cfg.Registry.Backend = b // a controlplane.Config
//	cfg.Metrics.MustRegister(b.Collectors()...)
//
// The zero value of every field of Config is the safe one. The
// settings (BLOCKCHAIN_MODE, BLOCKCHAIN_NETWORK, BLOCKCHAIN_RPC_URL,
// IDN_REGISTRY_ADDRESS, RELAYER_PRIVATE_KEY), the commands
// (controlplane registry deploy and status), what is written and how a
// write lands exactly once are in docs/control-plane.md, "Registry
// writes". The metrics are in its /metrics row.
package evm
