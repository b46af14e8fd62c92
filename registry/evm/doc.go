// Package evm writes the control plane's registry to an EVM chain: it
// deploys the IDNRegistry contract (registry/contracts) and implements
// controlplane.Registry on it with go-ethereum. It is the only package of
// the module that imports go-ethereum, so programs that keep registry
// writes disabled never link it.
package evm
