package gatewaylink

import (
	"fmt"
	"testing"

	"github.com/idnhq/idn/errcode"
)

// TestRules pins the answer of every error of the link, wrapped as its
// callers wrap them, so a new one cannot fall through to 500.
func TestRules(t *testing.T) {
	rows := []struct {
		err  error
		code errcode.Code
	}{
		{ErrNotFound, errcode.GatewayNotFound},
		{errGatewayNotPaired, errcode.GatewayNotPaired},
		{errGatewayOffline, errcode.GatewayOffline},
		{errGatewayTimeout, errcode.GatewayTimeout},
		{errGatewayRPCLimit, errcode.GatewayRPCLimitReached},
		{errPairingExpired, errcode.PairingExpired},
		{errPairingEnded, errcode.PairingEnded},
		{errPairingLimit, errcode.PairingLimitReached},
		{errGatewayLimit, errcode.GatewayLimitReached},
		{errNamespaceNotFound, errcode.NamespaceNotFound},
		{&pairingCodeError{AttemptsLeft: 3}, errcode.PairingCodeInvalid},
	}
	for _, row := range rows {
		for _, err := range []error{row.err, fmt.Errorf("gatewaylink: op: %w", row.err)} {
			if got := answer(err).Code(); got != row.code {
				t.Errorf("answer(%v) = %s, want %s", err, got, row.code)
			}
		}
	}
	if e := answer(&pairingCodeError{AttemptsLeft: 2}); fmt.Sprint(e.Extra["details"]) != "map[attempts_left:2]" {
		t.Errorf("PAIRING_CODE_INVALID details = %v", e.Extra)
	}
}
