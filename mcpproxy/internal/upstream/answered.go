package upstream

import "github.com/modelcontextprotocol/go-sdk/jsonrpc"

// ServerAnswered reports whether err carries a JSON-RPC error the server
// sent, as opposed to one the SDK made up locally for a transport failure
// (rejected by transport, client or server closing).
func ServerAnswered(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case *jsonrpc.Error:
		switch e.Code {
		case codeRejected, codeClientClosing, codeServerClosing:
		default:
			return true
		}
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return ServerAnswered(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if ServerAnswered(e) {
				return true
			}
		}
	}
	return false
}

// Codes of the go-sdk's locally made JSON-RPC errors (its internal jsonrpc2
// package: ErrRejected, ErrClientClosing, ErrServerClosing).
const (
	codeRejected      = -32005
	codeClientClosing = -32003
	codeServerClosing = -32004
)
