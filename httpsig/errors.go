package httpsig

import "errors"

// Sentinel errors. Every error returned by the verifier wraps exactly one of
// the first six; Code maps them onto the gateway's stable error codes.
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

// Code returns the stable error code for err: "AUTH_HEADERS_INVALID",
// "AUTH_SIGNATURE_INVALID", "AUTH_SIGNED_COMPONENTS_INVALID",
// "AUTH_IDENTITY_INVALID", "AUTH_NONCE_INVALID", "AUTH_REPLAY_DETECTED",
// "REQUEST_BODY_TOO_LARGE", or "" when err wraps none of the sentinels.
func Code(err error) string {
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

var errorCodes = [...]struct {
	err  error
	code string
}{
	{ErrHeadersInvalid, "AUTH_HEADERS_INVALID"},
	{ErrSignatureInvalid, "AUTH_SIGNATURE_INVALID"},
	{ErrComponentsInvalid, "AUTH_SIGNED_COMPONENTS_INVALID"},
	{ErrIdentityInvalid, "AUTH_IDENTITY_INVALID"},
	{ErrNonceInvalid, "AUTH_NONCE_INVALID"},
	{ErrReplayDetected, "AUTH_REPLAY_DETECTED"},
	{ErrBodyTooLarge, "REQUEST_BODY_TOO_LARGE"},
}
