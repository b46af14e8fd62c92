package gatewaylink

import (
	"errors"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/errcode"
)

// ErrNotFound is a gateway that does not exist or belongs to another
// owner: the two are not told apart.
var ErrNotFound = errors.New("gatewaylink: gateway not found")

// Errors of pairing and the relay; rules maps them to codes.
var (
	errGatewayNotPaired  = errors.New("gatewaylink: gateway key not paired")
	errGatewayOffline    = errors.New("gatewaylink: gateway not connected")
	errGatewayTimeout    = errors.New("gatewaylink: gateway did not answer in time")
	errGatewayRPCLimit   = errors.New("gatewaylink: too many RPCs waiting for this owner or gateway")
	errPairingExpired    = errors.New("gatewaylink: pairing session expired")
	errPairingEnded      = errors.New("gatewaylink: pairing session used or ended")
	errPairingLimit      = errors.New("gatewaylink: open pairing session limit of the namespace reached")
	errGatewayLimit      = errors.New("gatewaylink: gateway limit of the namespace reached")
	errNamespaceNotFound = sqldb.ErrNamespaceNotFound
)

// pairingCodeError is a pairing attempt with an unknown session or a wrong
// code.
type pairingCodeError struct {
	AttemptsLeft int // -1: the session is unknown
}

func (e *pairingCodeError) Error() string {
	return "gatewaylink: unknown pairing session or wrong pairing code"
}

// rules is the one table from the link's errors to answers.
var rules = web.Rules{
	web.When(web.Is(ErrNotFound), web.Code(errcode.GatewayNotFound)),
	web.When(web.Is(errGatewayNotPaired), web.Code(errcode.GatewayNotPaired)),
	web.When(web.Is(errGatewayOffline), web.Code(errcode.GatewayOffline)),
	web.When(web.Is(errGatewayTimeout), web.Code(errcode.GatewayTimeout)),
	web.When(web.Is(errGatewayRPCLimit), func(error) *apierror.Error {
		return apierror.Coded(errcode.GatewayRPCLimitReached, "").WithRetryAfter(time.Second)
	}),
	web.When(web.Is(errPairingExpired), web.Code(errcode.PairingExpired)),
	web.When(web.Is(errPairingEnded), web.Code(errcode.PairingEnded)),
	web.When(web.Is(errPairingLimit), web.CodeWait(errcode.PairingLimitReached)),
	web.When(web.Is(errGatewayLimit), web.Code(errcode.GatewayLimitReached)),
	web.When(web.Is(errNamespaceNotFound), web.Code(errcode.NamespaceNotFound)),
	web.When(web.IsType[*pairingCodeError], func(err error) *apierror.Error {
		pe, _ := errors.AsType[*pairingCodeError](err)
		e := apierror.Coded(errcode.PairingCodeInvalid, "")
		if pe.AttemptsLeft >= 0 {
			e = e.With("details", map[string]int{"attempts_left": pe.AttemptsLeft})
		}
		return e
	}),
}

// answer is err's answer through rules and the kit.
func answer(err error) *apierror.Error { return web.Answer(rules.Answer(err)) }
