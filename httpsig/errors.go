package httpsig

import "errors"

// Sentinel errors. Every error returned by the verifier wraps exactly one of
// them, so a server can answer each kind its own way.
var (
	// ErrHeadersInvalid: Signature or Signature-Input is missing, repeated on
	// several field lines, or malformed; the selected label is absent; or the
	// message carries several signatures while Verifier.Label is empty.
	ErrHeadersInvalid = errors.New("httpsig: signature headers invalid")
	// ErrSignatureInvalid: the signature does not verify, a covered
	// content-digest does not match the body, created/expires are outside the
	// accepted window or missing, or alg disagrees with the key.
	ErrSignatureInvalid = errors.New("httpsig: signature invalid")
	// ErrComponentsInvalid: a covered component is unknown, malformed, absent
	// from the message, or a required component is not covered.
	ErrComponentsInvalid = errors.New("httpsig: signed components invalid")
	// ErrIdentityInvalid: the KeyResolver could not produce a key.
	ErrIdentityInvalid = errors.New("httpsig: signer identity invalid")
	// ErrNonceInvalid: the nonce is missing or malformed, or no NonceChecker
	// is configured.
	ErrNonceInvalid = errors.New("httpsig: nonce invalid")
	// ErrReplayDetected: the NonceChecker has already seen the nonce.
	ErrReplayDetected = errors.New("httpsig: replay detected")
	// ErrBodyTooLarge: the body exceeds the configured limit.
	ErrBodyTooLarge = errors.New("httpsig: body too large")
)

// ErrRedirectRefused is returned by Transport for a request an
// http.Client created to follow a redirect: the Transport never signs one.
var ErrRedirectRefused = errors.New("httpsig: refusing to sign a redirected request")

// Error is the typed error returned by this package. Kind is one of the
// sentinels above; Detail says what was wrong without echoing secrets or
// signature bytes; Cause, when set, is the underlying error.
type Error struct {
	Kind   error
	Detail string
	Cause  error
}

func (e *Error) Error() string {
	msg := "httpsig: " + e.Detail
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Unwrap lets errors.Is match both the sentinel and the cause.
func (e *Error) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Cause}
}

func newError(kind error, detail string) *Error { return &Error{Kind: kind, Detail: detail} }

func wrapError(kind error, detail string, cause error) *Error {
	return &Error{Kind: kind, Detail: detail, Cause: cause}
}

// kindOf returns the sentinel that err wraps, or nil.
func kindOf(err error) error {
	for _, kind := range kinds {
		if errors.Is(err, kind) {
			return kind
		}
	}
	return nil
}

var kinds = [...]error{
	ErrHeadersInvalid, ErrSignatureInvalid, ErrComponentsInvalid, ErrIdentityInvalid,
	ErrNonceInvalid, ErrReplayDetected, ErrBodyTooLarge,
}
