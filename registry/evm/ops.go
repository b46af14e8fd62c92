package evm

import (
	"context"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// Contract events that record an authorisation change, by direction.
var (
	approvalEvents   = []string{"ClaimApprovedDirect", "ClaimApproved"}
	revocationEvents = []string{"ClaimRevokedDirect", "ClaimRevoked"}
)

// RegisterNamespace records name on chain, owned by the relayer. A
// namespace already registered is not sent again: the hash of its
// registration is returned.
func (b *Backend) RegisterNamespace(ctx context.Context, name string) (string, error) {
	const op = "registerNamespace"
	target := crypto.Keccak256Hash([]byte(name))
	defer b.targets.lock(target)()
	if err := b.settle(ctx, op, target); err != nil {
		return "", err
	}
	ns, err := call(ctx, b, b.binding.PackNamespaceOf(name), b.binding.UnpackNamespaceOf)
	if err != nil {
		return "", b.classify(op, err)
	}
	if ns.NsOwner != (common.Address{}) {
		return b.changeTx(ctx, op, ns.RegisteredAt, target, "NamespaceRegistered")
	}
	return b.write(ctx, op, target, b.binding.PackRegisterNamespace(name))
}

// TransferNamespace makes newOwner (a 0x address) the on-chain owner of
// name. Transferring to the current owner changes nothing on chain.
func (b *Backend) TransferNamespace(ctx context.Context, name, newOwner string) (string, error) {
	to, err := ParseAddress(newOwner)
	if err != nil {
		return "", err
	}
	target := crypto.Keccak256Hash([]byte(name))
	defer b.targets.lock(target)()
	return b.write(ctx, "transferNamespace", target, b.binding.PackTransferNamespace(name, to))
}

// SubmitClaim opens a two-step claim on chain and returns its on-chain id
// (decimal) with the transaction hash.
func (b *Backend) SubmitClaim(ctx context.Context, namespace, publicKey, service string) (string, string, error) {
	const op = "submitClaim"
	r, err := b.transact(ctx, op, TupleKey(namespace, publicKey, service), &b.cfg.Contract,
		b.binding.PackSubmitClaim(namespace, publicKey, service))
	if err != nil {
		return "", "", err
	}
	for _, l := range r.Logs {
		if ev, err := b.binding.UnpackClaimSubmittedEvent(l); err == nil {
			return ev.ClaimId.String(), r.TxHash.Hex(), nil
		}
	}
	return "", r.TxHash.Hex(), &WriteError{Op: op, Reason: ReasonRPC, Detail: "the receipt has no ClaimSubmitted log", TxHash: r.TxHash.Hex()}
}

// ApproveClaim approves a two-step claim by its on-chain id.
func (b *Backend) ApproveClaim(ctx context.Context, claimID string) (string, error) {
	return b.moveClaim(ctx, "approveClaim", claimID, b.binding.PackApproveClaim)
}

// RejectClaim rejects a two-step claim by its on-chain id.
func (b *Backend) RejectClaim(ctx context.Context, claimID string) (string, error) {
	return b.moveClaim(ctx, "rejectClaim", claimID, b.binding.PackRejectClaim)
}

// RevokeClaim revokes a two-step claim by its on-chain id.
func (b *Backend) RevokeClaim(ctx context.Context, claimID string) (string, error) {
	return b.moveClaim(ctx, "revokeClaim", claimID, b.binding.PackRevokeClaim)
}

func (b *Backend) moveClaim(ctx context.Context, op, claimID string, pack func(*big.Int) []byte) (string, error) {
	id, ok := new(big.Int).SetString(claimID, 10)
	if !ok || id.Sign() <= 0 {
		return "", fmt.Errorf("evm: %s: claim id %q is not a positive decimal", op, claimID)
	}
	target := crypto.Keccak256Hash([]byte("claim"), common.BigToHash(id).Bytes())
	defer b.targets.lock(target)()
	return b.write(ctx, op, target, pack(id))
}

// ApproveClaimDirect authorises the tuple in one step. An authorised tuple
// is not sent again: the hash of the write that authorised it is returned.
func (b *Backend) ApproveClaimDirect(ctx context.Context, namespace, publicKey, service string) (string, error) {
	return b.setAuthorization(ctx, "approveClaimDirect", namespace, publicKey, service, true,
		b.binding.PackApproveClaimDirect(namespace, publicKey, service))
}

// RevokeClaimDirect withdraws the tuple's authorisation in one step. An
// unauthorised tuple is not sent again: the hash of the write that revoked
// it is returned, or "" when the registry never authorised it.
func (b *Backend) RevokeClaimDirect(ctx context.Context, namespace, publicKey, service string) (string, error) {
	return b.setAuthorization(ctx, "revokeClaimDirect", namespace, publicKey, service, false,
		b.binding.PackRevokeClaimDirect(namespace, publicKey, service))
}

// setAuthorization is the idempotent direct write: the check on chain and
// the send happen under the tuple's lock, after any earlier transaction of
// the tuple has settled, so one process never sends a tuple's write twice.
// (Across processes the control plane's queue leases do that.)
func (b *Backend) setAuthorization(ctx context.Context, op, namespace, publicKey, service string, authorize bool, data []byte) (string, error) {
	if namespace == "" || publicKey == "" || service == "" {
		return "", errors.New("evm: namespace, public key and service are required")
	}
	target := TupleKey(namespace, publicKey, service)
	defer b.targets.lock(target)()
	if err := b.settle(ctx, op, target); err != nil {
		return "", err
	}
	a, err := call(ctx, b, b.binding.PackAuthorization(namespace, publicKey, service), b.binding.UnpackAuthorization)
	if err != nil {
		return "", b.classify(op, err)
	}
	if a.Authorized == authorize {
		events := approvalEvents
		if !authorize {
			if a.ChangedAt == 0 {
				return "", nil
			}
			events = revocationEvents
		}
		return b.changeTx(ctx, op, a.ChangedAt, target, events...)
	}
	return b.write(ctx, op, target, data)
}

// IsAuthorized reads the tuple's authorisation at the latest block.
func (b *Backend) IsAuthorized(ctx context.Context, namespace, publicKey, service string) (bool, error) {
	ok, err := call(ctx, b, b.binding.PackIsAuthorized(namespace, publicKey, service), b.binding.UnpackIsAuthorized)
	if err != nil {
		return false, b.classify("isAuthorized", err)
	}
	return ok, nil
}

func (b *Backend) write(ctx context.Context, op string, target common.Hash, data []byte) (string, error) {
	r, err := b.transact(ctx, op, target, &b.cfg.Contract, data)
	if err != nil {
		return "", err
	}
	return r.TxHash.Hex(), nil
}
