package identity

import (
	"errors"

	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/httpsig"
)

// authCodes is the one table from the httpsig sentinels, which every
// verification error of this package and of httpsig wraps, to the codes a
// server answers a failed verification with.
var authCodes = [...]struct {
	err  error
	code errcode.Code
}{
	{httpsig.ErrHeadersInvalid, errcode.AuthHeadersInvalid},
	{httpsig.ErrSignatureInvalid, errcode.AuthSignatureInvalid},
	{httpsig.ErrComponentsInvalid, errcode.AuthSignedComponentsInvalid},
	{httpsig.ErrIdentityInvalid, errcode.AuthIdentityInvalid},
	{httpsig.ErrNonceInvalid, errcode.AuthNonceInvalid},
	{httpsig.ErrReplayDetected, errcode.AuthReplayDetected},
	{httpsig.ErrBodyTooLarge, errcode.RequestBodyTooLarge},
}

// AuthCode returns the code for a verification error: an AUTH_* code, or
// REQUEST_BODY_TOO_LARGE, for an error that wraps an httpsig sentinel (as
// every error of Verifier.Verify and Caller.CheckBody does); ok is false for
// any other error, which is not the caller's fault.
func AuthCode(err error) (code errcode.Code, ok bool) {
	for _, row := range authCodes {
		if errors.Is(err, row.err) {
			return row.code, true
		}
	}
	return 0, false
}
