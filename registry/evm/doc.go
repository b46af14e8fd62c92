// Package evm writes the control plane's registry to an EVM chain: it
// deploys the IDNRegistry contract (registry/contracts/IDNRegistry.sol)
// and implements controlplane.Registry on it with go-ethereum. It is the
// only package of the module that imports go-ethereum: the controlplane
// package depends on its Registry interface alone, so programs that keep
// registry writes disabled never link the chain client.
//
// # Settings
//
// cmd/controlplane reads them from the environment into a Config:
//
//   - BLOCKCHAIN_MODE: disabled (default), sync, memory or queue; see
//     controlplane.RegistryConfig.
//   - BLOCKCHAIN_NETWORK: mainnet (Base, chain 8453; the default) or
//     testnet (Base Sepolia, chain 84532). New refuses an RPC endpoint
//     whose chain id differs.
//   - BLOCKCHAIN_RPC_URL: any standard JSON-RPC endpoint (http, https, ws,
//     wss); default the network's public endpoint, which is rate-limited.
//     It never appears in an error or log line, since providers put API
//     keys in it.
//   - IDN_REGISTRY_ADDRESS: the deployed contract. New refuses a contract
//     whose code lacks this version's write functions.
//   - RELAYER_PRIVATE_KEY: the secp256k1 key, in hex, of the account that
//     signs and pays for every write. The contract accepts writes from
//     this relayer alone; its owner (the deployer) may appoint another.
//
// # Commands
//
// `controlplane registry deploy` deploys the contract from the relayer key
// (owner and relayer at once) and prints its address for
// IDN_REGISTRY_ADDRESS. `controlplane registry status` prints the chain
// id, the relayer's address, balance and nonce, the contract's owner and
// relayer, and the writes the database still owes.
//
// # Writes
//
// Every write estimates its gas (plus a fifth for state changes before
// inclusion), pays twice the latest base fee plus the suggested tip, and
// waits up to ReceiptTimeout (60 s) for its receipt. A reverted write is a
// *WriteError whose detail is the decoded custom error, e.g.
// "NotRelayer(0x…)"; other failures are classified as rpc_unavailable,
// receipt_timeout, insufficient_funds or nonce.
//
// Nonces are counted in the Backend under a mutex held only while a
// transaction is signed and sent, so writes overlap while they wait for
// receipts. The count is read from the node's pending state at the first
// send, after any failed send or receipt timeout, and when the node refuses
// a nonce because another instance sharing the key used it; a restart
// therefore starts from the node's count.
//
// # What is written
//
// Everything a write sends is public for ever: a namespace's name, and a
// claim's namespace, public key and service (with their tuple key). No
// address or other detail a service reported about the agent is.
//
// # Exactly once
//
// The direct writes (RegisterNamespace, ApproveClaimDirect,
// RevokeClaimDirect) read the chain before sending: a write already done
// is not sent again, and the hash of the transaction that did it is found
// from the block the contract records for the last change. Within a
// process one write per tuple or namespace runs at a time, and a write
// whose receipt did not come in time is waited for before its target is
// written again. Across processes the control plane's queue leases each
// write to one worker for longer than a write can take. Together these
// make a write interrupted between sending and recording land exactly
// once: the next attempt finds it on chain and records its hash.
//
// # Metrics
//
// Backend.Collectors returns idn_registry_writes_total{op,outcome},
// idn_registry_write_duration_seconds{op},
// idn_registry_write_failures_total{op,reason} and
// idn_registry_nonce_resyncs_total. Register them on the registry the
// control plane serves at /metrics (controlplane.Config.Metrics), which
// also carries the queue depth, idn_registry_queue_depth{state}.
//
// The contract's ABI and bytecode are committed with the script that makes
// them (registry/contracts/build.sh, solc 0.8.37 from the npm registry);
// the Go bindings in internal/idnregistry are generated from them, and
// tests check that source, artifacts and bindings agree.
//
// Configuration follows the repository's one rule: the zero value of every
// field of Config is the safe one (a required field left empty is refused),
// and a protection is turned off only by a field that says so: a negative
// number, an explicit off value, or an Insecure… switch.
package evm
