package evm

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/rpc"
)

// Failure reasons of a write: the Reason of a *WriteError and the reason
// label of the failure metric.
const (
	ReasonReverted       = "reverted"           // the contract refused the write
	ReasonRPC            = "rpc_unavailable"    // the node could not be reached or answered with an error
	ReasonReceiptTimeout = "receipt_timeout"    // sent, but no receipt within the timeout
	ReasonFunds          = "insufficient_funds" // the relayer cannot pay for gas
	ReasonNonce          = "nonce"              // nonce conflicts outlasted the retries
)

// WriteError is a failed registry write. Its message names the operation,
// the reason and a detail safe to show to an owner: the decoded revert
// (e.g. "NotRelayer(0x…)") or the node's own message, never the RPC URL.
type WriteError struct {
	Op     string // contract function, e.g. "approveClaimDirect"
	Reason string // one of the Reason* constants
	Detail string
	TxHash string // set when a transaction was sent
}

func (e *WriteError) Error() string {
	msg := "evm: " + e.Op + ": " + e.Reason
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.TxHash != "" {
		msg += " (tx " + e.TxHash + ")"
	}
	return msg
}

// revertReason decodes revert data: a custom error of the contract with its
// arguments, Error(string), or Panic(uint256). The node supplies the data,
// so the reason is cut to maxReason bytes without control characters.
func revertReason(contract *abi.ABI, data []byte) string {
	return cleanReason(decodeRevert(contract, data))
}

const maxReason = 200

func cleanReason(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	if len(s) > maxReason {
		s = strings.ToValidUTF8(s[:maxReason], "") + "…"
	}
	if s == "" {
		return "without reason"
	}
	return s
}

func decodeRevert(contract *abi.ABI, data []byte) string {
	if len(data) < 4 {
		return ""
	}
	if msg, err := abi.UnpackRevert(data); err == nil {
		return msg
	}
	if e, err := contract.ErrorByID([4]byte(data[:4])); err == nil {
		vals, err := e.Inputs.Unpack(data[4:])
		if err == nil {
			args := make([]string, len(vals))
			for i, v := range vals {
				args[i] = fmt.Sprint(v)
			}
			return e.Name + "(" + strings.Join(args, ", ") + ")"
		}
		return e.Name
	}
	return "0x" + hex.EncodeToString(data)
}

// revertData extracts the revert data a node attached to a JSON-RPC error.
func revertData(err error) ([]byte, bool) {
	var de rpc.DataError
	if !errors.As(err, &de) {
		return nil, false
	}
	s, ok := de.ErrorData().(string)
	if !ok {
		return nil, false
	}
	b, herr := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	return b, herr == nil
}

// isReverted reports an execution revert, with or without data.
func isReverted(err error) bool {
	if _, ok := revertData(err); ok {
		return true
	}
	return strings.Contains(err.Error(), "execution reverted")
}

// isNonceError reports a rejection caused by the nonce the transaction
// carried: another writer used it, or the node already has it.
func isNonceError(err error) bool {
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"nonce too low", "nonce too high", "already known", "replacement transaction underpriced",
		"invalid nonce", "known transaction"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// classify turns an RPC-side failure into a *WriteError whose detail never
// carries the RPC URL (which often holds the provider's API key).
func (b *Backend) classify(op string, err error) *WriteError {
	var we *WriteError
	if errors.As(err, &we) {
		return we
	}
	w := &WriteError{Op: op, Reason: ReasonRPC}
	var (
		ue *url.Error
		he rpc.HTTPError
		re rpc.Error
		ne net.Error
	)
	switch {
	case isReverted(err):
		w.Reason = ReasonReverted
		data, _ := revertData(err)
		w.Detail = revertReason(b.abi, data)
	case strings.Contains(strings.ToLower(err.Error()), "insufficient funds"):
		w.Reason, w.Detail = ReasonFunds, "the relayer "+b.from.Hex()+" cannot pay for gas"
	case errors.Is(err, context.DeadlineExceeded):
		w.Detail = "rpc call timed out"
	case errors.As(err, &he):
		w.Detail = fmt.Sprintf("rpc answered HTTP %d", he.StatusCode)
	case errors.As(err, &ue), errors.As(err, &ne):
		w.Detail = "rpc unreachable"
		if ne != nil && ne.Timeout() || ue != nil && ue.Timeout() {
			w.Detail = "rpc unreachable (timeout)"
		}
	case errors.As(err, &re):
		w.Detail = fmt.Sprintf("rpc error %d: %s", re.ErrorCode(), b.redact(re.Error()))
	default:
		w.Detail = b.redact(err.Error())
	}
	return w
}

// redact removes the RPC URL from a message, in case a transport error
// quoted it.
func (b *Backend) redact(msg string) string {
	if rpcURL := b.cfg.RPCURL; rpcURL != "" {
		msg = strings.ReplaceAll(msg, rpcURL, "<rpc>")
		if u, err := url.Parse(rpcURL); err == nil && u.Host != "" {
			msg = strings.ReplaceAll(msg, u.Host+u.EscapedPath(), "<rpc>")
		}
	}
	return msg
}

// weiToEther formats wei as ether with up to 18 decimals.
func weiToEther(wei *big.Int) string {
	if wei == nil {
		return "0"
	}
	f := new(big.Float).SetPrec(256).SetInt(wei)
	f.Quo(f, big.NewFloat(1e18))
	s := f.Text('f', 18)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
