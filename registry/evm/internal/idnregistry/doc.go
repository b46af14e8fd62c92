// Package idnregistry holds the Go bindings of the IDNRegistry contract
// (registry/contracts/IDNRegistry.sol): abigen's v2 generator applied to the
// committed ABI and bytecode by registry/contracts/build.sh. Its tests check
// that the bindings, the artifacts and the Solidity source agree.
package idnregistry
